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
