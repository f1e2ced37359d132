"""TorchRL on a simppo env: ``TorchRLEnv(simppo.make_env("pendulum", 64, "cpu"))`` is a batched TorchRL ``EnvBase``
(``batch_size [num_envs]``, on the env's device, specs from the env), so TorchRL's collectors, losses and trainers
run on it.

Keys: ``observation [N, obs_dim]`` (the actor's), ``critic_observation [N, critic_dim]``, ``action [N, A]``,
``reward [N, 1]``, ``done`` / ``terminated`` / ``truncated [N, 1]`` (bool). simppo resets an env that ended inside
the step; TorchRL's way is a step that returns the last observation of the ended episode under ``"next"`` and a
reset (``"_reset"`` mask) that returns the first of the new one. So ``_step`` reports the terminal observation
(simppo's ``extras["terminal_obs"]``) and keeps the new episode's first observation, which the following partial
reset hands out without stepping anything. A partial reset therefore restarts exactly the envs that ended in the
last step (what TorchRL's collectors ask for); an env that did not end is not restarted by one. A reset without
``"_reset"`` resets every env. Seeds are fixed when the env is built (``simppo.make_env(..., seed=...)``).
"""

from __future__ import annotations

import torch

from simppo.envs.base import VecEnv
from simppo.integrations import require
from simppo.integrations.external import ExternalVecEnv

require("torchrl", "torchrl")
from tensordict import TensorDict, TensorDictBase  # noqa: E402
from torchrl.data import Categorical, Composite, Unbounded  # noqa: E402
from torchrl.envs import EnvBase  # noqa: E402


class TorchRLEnv(EnvBase):
    """simppo ``VecEnv`` → TorchRL ``EnvBase`` (see the module)."""

    def __init__(self, env: VecEnv):
        device = torch.device(env.device)
        n = env.num_envs
        super().__init__(device=device, batch_size=torch.Size([n]))
        self.env = env
        obs_dim = env.obs_dims["obs"]
        critic_dim = env.obs_dims.get("critic_obs", obs_dim)
        self.observation_spec = Composite(
            observation=Unbounded((n, obs_dim), dtype=torch.float32, device=device),
            critic_observation=Unbounded((n, critic_dim), dtype=torch.float32, device=device), shape=(n,))
        self.action_spec = Unbounded((n, env.num_actions), dtype=torch.float32, device=device)
        self.reward_spec = Unbounded((n, 1), dtype=torch.float32, device=device)
        self.done_spec = Composite(
            {k: Categorical(2, (n, 1), dtype=torch.bool, device=device) for k in ("done", "terminated", "truncated")},
            shape=(n,))
        self._next_first: dict[str, torch.Tensor] | None = None  # first observations of the episodes begun in a step

    def _observations(self, obs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {"observation": obs["obs"].clone(), "critic_observation": obs["critic_obs"].clone()}

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        partial = tensordict is not None and "_reset" in tensordict.keys()
        if partial and self._next_first is not None:
            obs = self._next_first  # simppo already reset the envs that ended, inside the step
        else:
            obs = self._observations(self.env.reset())
        zeros = torch.zeros((self.env.num_envs, 1), dtype=torch.bool, device=self.device)
        return TensorDict({**obs, "done": zeros, "terminated": zeros.clone(), "truncated": zeros.clone()},
                          batch_size=self.batch_size, device=self.device)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        obs, reward, terminated, truncated, extras = self.env.step(tensordict.get("action"))
        self._next_first = self._observations(obs)
        flags = {"done": (terminated | truncated).unsqueeze(-1), "terminated": terminated.unsqueeze(-1).clone(),
                 "truncated": truncated.unsqueeze(-1).clone()}
        return TensorDict({**self._observations(extras["terminal_obs"]), "reward": reward.unsqueeze(-1).clone(),
                           **flags}, batch_size=self.batch_size, device=self.device)

    def _set_seed(self, seed: int | None) -> None:
        if seed is not None and seed != getattr(self.env, "seed", seed):
            raise ValueError(f"TorchRLEnv.set_seed({seed}): the env was built with seed {self.env.seed}; its random "
                             "streams are fixed at construction: build it with simppo.make_env(..., seed=...)")

    def close(self, *, raise_if_closed: bool = True) -> None:
        if not getattr(self, "is_closed", False):
            self.env.close()
        super().close(raise_if_closed=raise_if_closed)


class FromTorchRL(ExternalVecEnv):
    """The other way round: a batched TorchRL ``EnvBase`` (``batch_size [N]``, an ``observation`` key, a continuous
    action) as a simppo ``VecEnv``, so that simppo's PPO trains it. Each step is TorchRL's ``step_and_maybe_reset``:
    the step's ``"next"`` observation is the terminal one of the envs that ended, and the returned observation the
    first of their new episodes. ``obs_key`` names the observation (also the critic's); returns and lengths of the
    ended episodes are reported in ``extras["episode"]``."""

    def __init__(self, env: EnvBase, obs_key: str = "observation"):
        if len(env.batch_size) != 1:
            raise ValueError(f"FromTorchRL: the env's batch_size {tuple(env.batch_size)} must be [num_envs]")
        self.tr_env, self.obs_key = env, obs_key
        self.num_envs = int(env.batch_size[0])
        self.device = env.device if env.device is not None else torch.device("cpu")
        self.num_actions = int(env.action_spec.shape[-1])
        dim = int(env.observation_spec[obs_key].shape[-1])
        self.obs_dims = {"obs": dim, "critic_obs": dim}
        self._td = None
        self._return = torch.zeros(self.num_envs, device=self.device)
        self._length = torch.zeros(self.num_envs, device=self.device)

    def _obs(self, td) -> dict[str, torch.Tensor]:
        obs = td.get(self.obs_key).to(torch.float32).reshape(self.num_envs, -1)
        return {"obs": obs, "critic_obs": obs}

    def reset(self) -> dict[str, torch.Tensor]:
        self._td = self.tr_env.reset()
        self._return.zero_()
        self._length.zero_()
        return self._obs(self._td)

    def get_observations(self) -> dict[str, torch.Tensor]:
        return self._obs(self._td) if self._td is not None else self.reset()

    def step(self, actions: torch.Tensor):
        self._td.set("action", actions.reshape(self.tr_env.action_spec.shape).to(self.tr_env.action_spec.dtype))
        out, self._td = self.tr_env.step_and_maybe_reset(self._td)
        nxt = out.get("next")
        reward = nxt.get("reward").reshape(self.num_envs).to(torch.float32)
        terminated = nxt.get("terminated").reshape(self.num_envs)
        truncated = nxt.get("truncated", torch.zeros_like(terminated)).reshape(self.num_envs)
        done = terminated | truncated
        self._return += reward
        self._length += 1.0
        episode = {"reward": self._return.clone(), "length": self._length.clone()}
        self._return.masked_fill_(done, 0.0)
        self._length.masked_fill_(done, 0.0)
        extras = {"terminal_obs": self._obs(nxt), "episode": episode}
        return self._obs(self._td), reward, terminated, truncated, extras


    def close(self) -> None:
        self.tr_env.close()


def _single_in_key(module, what: str):
    keys = list(getattr(module, "in_keys", []))
    if len(keys) != 1:
        raise ValueError(f"{what}: the module reads {keys}; simppo hands it one observation tensor, so it must read "
                         "exactly one key")
    return keys[0]


class TorchRLActor(torch.nn.Module):
    """A TorchRL policy as simppo's actor (one PPO core; the observation normalizer stays simppo's): ``obs [B, D]``
    (normalised) → ``(mean [B, A], log_std [B, A])``. ``module``: a ``ProbabilisticActor`` (any
    ``ProbabilisticTensorDictSequential``) whose distribution is a diagonal Gaussian (``torch.distributions.Normal``
    or TorchRL's ``IndependentNormal``) over ``loc`` / ``scale``, or a ``TensorDictModule`` writing ``loc`` and
    ``scale``; it reads one observation key. simppo samples, scores and bounds the actions of that Gaussian itself;
    other distributions (``TanhNormal``, ...) are refused in one line."""

    per_motion = False

    def __init__(self, module):
        super().__init__()
        from torchrl.modules.distributions import IndependentNormal

        self.obs_key = _single_in_key(module, "TorchRLActor")
        dist_module = module[-1] if hasattr(module, "get_dist_params") else None
        if dist_module is not None:
            dist = getattr(dist_module, "distribution_class", None)
            if dist not in (torch.distributions.Normal, IndependentNormal):
                raise ValueError(f"TorchRLActor: distribution {getattr(dist, '__name__', dist)}: simppo's PPO trains a "
                                 "diagonal Gaussian (torch.distributions.Normal or IndependentNormal over loc/scale)")
            keys = dist_module.in_keys
            mapping = dict(keys) if isinstance(keys, dict) else {k: k for k in keys}
            out_keys = {name: mapping.get(name) for name in ("loc", "scale")}
        else:
            out_keys = {name: name if name in getattr(module, "out_keys", []) else None for name in ("loc", "scale")}
        if None in out_keys.values():
            raise ValueError(f"TorchRLActor: the module must give a Gaussian's loc and scale (found {out_keys})")
        self.loc_key, self.scale_key = out_keys["loc"], out_keys["scale"]
        self.module = module

    def forward(self, obs: torch.Tensor, rows: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        td = TensorDict({self.obs_key: obs}, batch_size=obs.shape[:1])
        params = self.module.get_dist_params(td) if hasattr(self.module, "get_dist_params") else self.module(td)
        return params.get(self.loc_key), params.get(self.scale_key).log()

    def mean(self, obs: torch.Tensor) -> torch.Tensor:
        return self(obs)[0]

    def clamp_log_std_(self) -> None:
        """Nothing to project: the module bounds its own scale."""


class TorchRLCritic(torch.nn.Module):
    """A TorchRL value module (``ValueOperator`` or any ``TensorDictModule`` reading one observation key and writing
    ``value_key``) as simppo's critic: ``critic_obs [B, D]`` (normalised) → ``value [B]``."""

    def __init__(self, module, value_key="state_value"):
        super().__init__()
        self.obs_key = _single_in_key(module, "TorchRLCritic")
        if value_key not in list(getattr(module, "out_keys", [])):
            raise ValueError(f"TorchRLCritic: value_key={value_key!r} is not among the module's out_keys "
                             f"{list(getattr(module, 'out_keys', []))}")
        self.module, self.value_key = module, value_key

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        td = TensorDict({self.obs_key: obs}, batch_size=obs.shape[:1])
        return self.module(td).get(self.value_key).reshape(obs.shape[0])
