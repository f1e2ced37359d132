"""Actor (diagonal Gaussian MLP) and critic (MLP) with device-resident observation normalizers."""

import math

import torch
from torch import nn

from simppo.agent.activations import ELU
from simppo.agent.config import ActorCfg, MLPCfg
from simppo.agent.normalizers import RunningMeanStd

_ACTIVATIONS = {"elu": ELU, "relu": nn.ReLU, "tanh": nn.Tanh}


def build_mlp(in_dim: int, units: list[int], out_dim: int, activation: str) -> nn.Sequential:
    if activation not in _ACTIVATIONS:
        raise ValueError(f"unknown activation '{activation}' (choose from {sorted(_ACTIVATIONS)})")
    layers: list[nn.Module] = []
    last = in_dim
    for width in units:
        layers += [nn.Linear(last, width), _ACTIVATIONS[activation]()]
        last = width
    layers.append(nn.Linear(last, out_dim))
    return nn.Sequential(*layers)


class Actor(nn.Module):
    """``obs [B, obs_dim]`` (already normalised) → ``(mean [B, A], log_std [B, A])``.

    ``num_rows=None``: one shared log-std ``[A]``. ``num_rows=R``: per-motion exploration, a log-std table
    ``[R, A]``; :meth:`forward` then takes ``rows [B]`` (int64, each sample's MotionIndex row) and gathers
    its row, so only the rows that were used get gradients.
    """

    def __init__(self, obs_dim: int, num_actions: int, cfg: ActorCfg, num_rows: int | None = None):
        super().__init__()
        self.mu = build_mlp(obs_dim, cfg.units, num_actions, cfg.activation)
        self.tanh_mean = cfg.tanh_mean
        self.min_log_std, self.max_log_std = float(cfg.min_log_std), float(cfg.max_log_std)
        if self.min_log_std > self.max_log_std:
            raise ValueError(f"actor.min_log_std {self.min_log_std} > actor.max_log_std {self.max_log_std}")
        if cfg.log_std_bounds not in ("clamp", "tanh"):
            raise ValueError(f"actor.log_std_bounds={cfg.log_std_bounds!r}: choose clamp or tanh")
        self.stretch = cfg.log_std_bounds == "tanh"
        shape = (num_actions,) if num_rows is None else (int(num_rows), num_actions)
        init = float(cfg.init_log_std)
        if self.stretch:  # the parameter whose stretch is init_log_std (kept off the bounds, where tanh saturates)
            span = self.max_log_std - self.min_log_std
            unit = 2.0 * (init - self.min_log_std) / span - 1.0 if span > 0 else 0.0
            init = math.atanh(min(max(unit, -0.999), 0.999))
        log_std = torch.full(shape, init)
        if cfg.learnable_log_std:
            self.log_std = nn.Parameter(log_std)
        else:
            self.register_buffer("log_std", log_std)
        last = self.mu[-1]
        nn.init.uniform_(last.weight, -0.01, 0.01)
        nn.init.zeros_(last.bias)

    @property
    def per_motion(self) -> bool:
        return self.log_std.dim() == 2

    def mean(self, obs: torch.Tensor) -> torch.Tensor:
        """The action mean ``[B, A]`` alone (deterministic policy; needs no motion rows)."""
        mean = self.mu(obs)
        return torch.tanh(mean) if self.tanh_mean else mean

    def effective_log_std(self) -> torch.Tensor:
        """The log-std ``[A]`` (or ``[R, A]``) the policy samples with: the parameter itself, or its stretch into
        ``[min_log_std, max_log_std]`` (``log_std_bounds=tanh``)."""
        if not self.stretch:
            return self.log_std
        return self.min_log_std + 0.5 * (self.max_log_std - self.min_log_std) * (torch.tanh(self.log_std) + 1.0)

    def forward(self, obs: torch.Tensor, rows: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        mean = self.mean(obs)
        log_std = self.effective_log_std()
        if not self.per_motion:
            return mean, log_std.expand_as(mean)
        if rows is None:
            raise ValueError("per-motion exploration: the actor needs each sample's motion row")
        # a gather, not ``log_std[rows]``: indexing's backward accumulates the rows' gradients with parallel atomic
        # adds on a CPU (run-to-run different sums), a gather's backward is a scatter-add, in order on a CPU
        return mean, log_std.gather(0, rows.long()[:, None].expand(-1, log_std.shape[-1]))

    @torch.no_grad()
    def clamp_log_std_(self) -> None:
        """Project every log-std entry (every row) into ``[min_log_std, max_log_std]`` in place (a stretched
        log-std is always inside them)."""
        if not self.stretch:
            self.log_std.clamp_(self.min_log_std, self.max_log_std)


class Critic(nn.Module):
    """``obs [B, obs_dim]`` (already normalised) → ``value [B]``."""

    def __init__(self, obs_dim: int, cfg: MLPCfg):
        super().__init__()
        self.net = build_mlp(obs_dim, cfg.units, 1, cfg.activation)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs).squeeze(-1)


class PPOModel(nn.Module):
    """Actor + critic + their observation normalizers (actor ``obs``, critic ``critic_obs``).

    ``normalize_obs=False`` passes observations through unchanged (the normalizers stay at identity stats).
    ``num_rows``: per-motion exploration with a ``[num_rows, A]`` log-std table (see :class:`Actor`).
    ``actor`` / ``critic``: modules of the same contract to use instead of the MLPs (``actor(obs [B, obs_dim])`` →
    ``(mean [B, A], log_std [B, A])`` with ``mean(obs)``, ``clamp_log_std_()``, ``per_motion``; ``critic(obs)`` →
    ``value [B]``), e.g. :class:`~simppo.integrations.torchrl.TorchRLActor`; the normalizers stay simppo's.
    """

    def __init__(
        self,
        obs_dim: int,
        critic_obs_dim: int,
        num_actions: int,
        actor_cfg: ActorCfg,
        critic_cfg: MLPCfg,
        obs_clip: float = 5.0,
        normalize_obs: bool = True,
        num_rows: int | None = None,
        actor: nn.Module | None = None,
        critic: nn.Module | None = None,
    ):
        super().__init__()
        if actor is not None and num_rows is not None:
            raise ValueError("per-motion exploration needs simppo's actor (its log-std table); a given actor has its "
                             "own exploration: use agent.exploration=shared")
        self.actor = actor if actor is not None else Actor(obs_dim, num_actions, actor_cfg, num_rows)
        self.critic = critic if critic is not None else Critic(critic_obs_dim, critic_cfg)
        self.obs_norm = RunningMeanStd((obs_dim,), clip=obs_clip)
        self.critic_obs_norm = RunningMeanStd((critic_obs_dim,), clip=obs_clip)
        self.normalize_obs = normalize_obs

    def compile_mlps(self) -> None:
        """``torch.compile`` the actor's and the critic's MLPs in place (state-dict keys unchanged)."""
        getattr(self.actor, "mu", self.actor).compile()
        getattr(self.critic, "net", self.critic).compile()

    @torch.no_grad()
    def normalize(self, obs: dict[str, torch.Tensor], update: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """Env observations (``obs`` ``[B, obs_dim]``, optional ``critic_obs`` ``[B, critic_obs_dim]``) →
        normalised ``(actor_obs, critic_obs)``; ``update`` first merges the batch into the running stats."""
        actor_obs, critic_obs = obs["obs"], obs.get("critic_obs", obs["obs"])
        if not self.normalize_obs:
            return actor_obs, critic_obs
        if update:
            self.obs_norm.update(actor_obs)
            self.critic_obs_norm.update(critic_obs)
        return self.obs_norm(actor_obs), self.critic_obs_norm(critic_obs)

    @torch.no_grad()
    def normalize_critic(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """The normalised critic observations ``[B, critic_obs_dim]`` alone (as :meth:`normalize` returns them)."""
        critic_obs = obs.get("critic_obs", obs["obs"])
        return self.critic_obs_norm(critic_obs) if self.normalize_obs else critic_obs

    @torch.no_grad()
    def act_inference(self, obs: dict[str, torch.Tensor] | torch.Tensor) -> torch.Tensor:
        """Deterministic policy: raw actor observations (the env's ``obs`` dict or its ``obs`` tensor
        ``[B, obs_dim]``) → mean action ``[B, A]``. Pure tensor ops (normalizer clip included), so it traces."""
        actor_obs = obs["obs"] if isinstance(obs, dict) else obs
        if self.normalize_obs:
            actor_obs = self.obs_norm(actor_obs)
        return self.actor.mean(actor_obs)


def log_std_rows(model_state: dict) -> int | None:
    """Rows of the per-motion log-std table in a :class:`PPOModel` state dict; ``None`` for a shared log-std."""
    log_std = model_state.get("actor.log_std")
    return int(log_std.shape[0]) if isinstance(log_std, torch.Tensor) and log_std.dim() == 2 else None
