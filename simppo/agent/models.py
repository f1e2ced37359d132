"""Actor (diagonal Gaussian MLP) and critic (MLP) with device-resident observation normalizers."""

import torch
from torch import nn

from simppo.agent.config import ActorCfg, MLPCfg
from simppo.agent.normalizers import RunningMeanStd

_ACTIVATIONS = {"elu": nn.ELU, "relu": nn.ReLU, "tanh": nn.Tanh}


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
    """``obs [B, obs_dim]`` (already normalised) → ``(mean [B, A], log_std [B, A])``."""

    def __init__(self, obs_dim: int, num_actions: int, cfg: ActorCfg):
        super().__init__()
        self.mu = build_mlp(obs_dim, cfg.units, num_actions, cfg.activation)
        self.tanh_mean = cfg.tanh_mean
        log_std = torch.full((num_actions,), float(cfg.init_log_std))
        if cfg.learnable_log_std:
            self.log_std = nn.Parameter(log_std)
        else:
            self.register_buffer("log_std", log_std)
        last = self.mu[-1]
        nn.init.uniform_(last.weight, -0.01, 0.01)
        nn.init.zeros_(last.bias)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean = self.mu(obs)
        if self.tanh_mean:
            mean = torch.tanh(mean)
        return mean, self.log_std.expand_as(mean)


class Critic(nn.Module):
    """``obs [B, obs_dim]`` (already normalised) → ``value [B]``."""

    def __init__(self, obs_dim: int, cfg: MLPCfg):
        super().__init__()
        self.net = build_mlp(obs_dim, cfg.units, 1, cfg.activation)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs).squeeze(-1)


class PPOModel(nn.Module):
    """Actor + critic + their observation normalizers (actor ``obs``, critic ``critic_obs``)."""

    def __init__(
        self,
        obs_dim: int,
        critic_obs_dim: int,
        num_actions: int,
        actor_cfg: ActorCfg,
        critic_cfg: MLPCfg,
        obs_clip: float = 5.0,
    ):
        super().__init__()
        self.actor = Actor(obs_dim, num_actions, actor_cfg)
        self.critic = Critic(critic_obs_dim, critic_cfg)
        self.obs_norm = RunningMeanStd((obs_dim,), clip=obs_clip)
        self.critic_obs_norm = RunningMeanStd((critic_obs_dim,), clip=obs_clip)
