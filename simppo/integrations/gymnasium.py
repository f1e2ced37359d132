"""A gymnasium vector env over a simppo env: ``GymVectorEnv(simppo.make_env("pendulum", 64, "cpu"))``.

gymnasium's ``VectorEnv`` API with torch tensors on the env's device (no host copies): ``reset() -> (obs, infos)``,
``step(actions) -> (obs, rewards, terminations, truncations, infos)`` with ``autoreset_mode`` same-step: an env that
ended is reset within the step, ``obs`` holds its new episode's first observation and ``infos["final_obs"]`` its
last one (rows where ``infos["_final_obs"]``). Observations ``[num_envs, obs_dim]`` are the actor's; the critic's
(privileged) ones are ``infos["critic_obs"]``. ``infos["episode"]`` holds the totals of the episodes that ended
(rows where ``infos["_episode"]``). Returned tensors are fresh copies on the device.
"""

from __future__ import annotations

import numpy as np
import torch

from simppo.envs.base import VecEnv
from simppo.integrations import require
from simppo.integrations.external import ExternalVecEnv

gym = require("gymnasium", "gymnasium")
from gymnasium.spaces import Box  # noqa: E402
from gymnasium.vector import AutoresetMode, VectorEnv  # noqa: E402
from gymnasium.vector.utils import batch_space  # noqa: E402


class GymVectorEnv(VectorEnv):
    """``simppo`` env → ``gymnasium.vector.VectorEnv`` (see the module)."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(self, env: VecEnv):
        self.env = env
        self.num_envs = env.num_envs
        self.device = torch.device(env.device)
        obs_dim, critic_dim = env.obs_dims["obs"], env.obs_dims.get("critic_obs", env.obs_dims["obs"])
        self.single_observation_space = Box(-np.inf, np.inf, (obs_dim,), np.float32)
        # simppo's actions are unbounded (the env scales and clips them into joint targets)
        self.single_action_space = Box(-np.inf, np.inf, (env.num_actions,), np.float32)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.critic_observation_space = Box(-np.inf, np.inf, (critic_dim,), np.float32)
        self.render_mode = None
        self.spec = None

    def reset(self, *, seed: int | list[int] | None = None, options: dict | None = None):
        """Reset every env. The random streams are the env's own, fixed when it was built: a ``seed`` other than
        the env's is refused (build it with ``simppo.make_env(..., seed=...)``)."""
        if seed is not None and seed != getattr(self.env, "seed", seed):
            raise ValueError(f"GymVectorEnv.reset(seed={seed}): the env was built with seed {self.env.seed}; its "
                             "random streams are fixed at construction: build it with simppo.make_env(..., seed=...)")
        if options:
            raise ValueError(f"GymVectorEnv.reset(options={options!r}): simppo envs take no reset options")
        obs = self.env.reset()
        return obs["obs"].clone(), {"critic_obs": obs["critic_obs"].clone()}

    def step(self, actions):
        """One control step of every env with ``actions [num_envs, num_actions]`` (tensor or array)."""
        actions = torch.as_tensor(actions, dtype=torch.float32, device=self.device)
        obs, reward, terminated, truncated, extras = self.env.step(actions)
        done = terminated | truncated
        infos = {"critic_obs": obs["critic_obs"].clone(),
                 "final_obs": extras["terminal_obs"]["obs"].clone(), "_final_obs": done.clone(),
                 "episode": {k: v.clone() for k, v in extras.get("episode", {}).items()}, "_episode": done.clone()}
        return obs["obs"].clone(), reward.clone(), terminated.clone(), truncated.clone(), infos

    def close_extras(self, **kwargs) -> None:
        self.env.close()


class WrappedGymEnv(ExternalVecEnv):
    """The other way round: a gymnasium env as a simppo ``VecEnv``, so that simppo's PPO trains it.

    ``WrappedGymEnv("Pendulum-v1", num_envs=16, seed=0)`` makes a synchronous gymnasium vector env; a gymnasium
    ``Env`` is wrapped as one env, and a ``VectorEnv`` must reset the same-step way (``autoreset_mode=SAME_STEP``:
    simppo's API reports the last observation of an ended episode with the step that ended it). Observations are
    flattened to float32 ``[num_envs, obs_dim]`` tensors (copies from the env's numpy arrays: gymnasium envs live
    on the host); a ``Box`` action space with finite bounds takes actions in ``[-1, 1]``, scaled to its bounds and
    clipped. Episode returns and lengths are reported in ``extras["episode"]``.
    """

    def __init__(self, env, num_envs: int | None = None, seed: int = 0, device: str = "cpu", **make_kwargs):
        if isinstance(env, str):
            env = gym.make_vec(env, num_envs=num_envs or 1, vectorization_mode="sync",
                               vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP}, **make_kwargs)
        elif isinstance(env, gym.Env):
            single = env
            env = gym.vector.SyncVectorEnv([lambda: single], autoreset_mode=AutoresetMode.SAME_STEP)
        if not isinstance(env, VectorEnv):
            raise TypeError(f"WrappedGymEnv: expected a gymnasium env id, Env or VectorEnv, got {type(env).__name__}")
        mode = env.metadata.get("autoreset_mode")
        if mode != AutoresetMode.SAME_STEP:
            raise ValueError(f"WrappedGymEnv: the vector env resets with autoreset_mode={mode}; simppo needs "
                             "SAME_STEP (gymnasium.make_vec(..., vector_kwargs={'autoreset_mode': "
                             "gymnasium.vector.AutoresetMode.SAME_STEP}))")
        space = env.single_action_space
        if not isinstance(space, Box):
            raise ValueError(f"WrappedGymEnv: simppo's PPO acts in continuous (Box) spaces, not {space}")
        self.gym_env, self.seed, self.device = env, int(seed), device
        self.num_envs, self.num_actions = env.num_envs, int(np.prod(space.shape))
        obs_dim = int(np.prod(gym.spaces.flatdim(env.single_observation_space)))
        self.obs_dims = {"obs": obs_dim, "critic_obs": obs_dim}
        bounded = np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))
        self._low, self._high = (space.low, space.high) if bounded else (None, None)
        self._obs_space = env.single_observation_space
        self._return = np.zeros(self.num_envs, np.float64)
        self._length = np.zeros(self.num_envs, np.int64)
        self._obs: dict[str, torch.Tensor] | None = None
        self._seeded = False
        self.episodes_done = 0  # episodes ended since the env was built (a host count: the env lives on the host)

    def _tensor(self, obs) -> torch.Tensor:
        flat = np.asarray(obs, dtype=np.float32).reshape(self.num_envs, -1)
        return torch.as_tensor(flat, device=self.device)

    def reset(self) -> dict[str, torch.Tensor]:
        obs, _ = self.gym_env.reset(seed=None if self._seeded else self.seed)
        self._seeded = True
        self._return[:] = 0.0
        self._length[:] = 0
        t = self._tensor(obs)
        self._obs = {"obs": t, "critic_obs": t}
        return self._obs

    def get_observations(self) -> dict[str, torch.Tensor]:
        return self._obs if self._obs is not None else self.reset()

    def step(self, actions: torch.Tensor):
        shape = (self.num_envs, *self.gym_env.single_action_space.shape)
        a = actions.detach().to("cpu", torch.float32).numpy().reshape(shape)
        if self._low is not None:
            a = self._low + (np.clip(a, -1.0, 1.0) + 1.0) * 0.5 * (self._high - self._low)
        obs, reward, terminated, truncated, infos = self.gym_env.step(a)
        done = np.logical_or(terminated, truncated)
        self.episodes_done += int(done.sum())
        self._return += reward
        self._length += 1
        final = np.asarray(obs, dtype=np.float32).reshape(self.num_envs, -1).copy()
        if done.any() and "final_obs" in infos:
            for i in np.flatnonzero(done):
                final[i] = np.asarray(infos["final_obs"][i], dtype=np.float32).reshape(-1)
        episode = {"reward": torch.as_tensor(self._return.astype(np.float32), device=self.device),
                   "length": torch.as_tensor(self._length.astype(np.float32), device=self.device)}
        self._return[done] = 0.0
        self._length[done] = 0
        t, terminal = self._tensor(obs), torch.as_tensor(final, device=self.device)
        self._obs = {"obs": t, "critic_obs": t}
        extras = {"terminal_obs": {"obs": terminal, "critic_obs": terminal}, "episode": episode}
        return (self._obs, torch.as_tensor(np.asarray(reward, np.float32), device=self.device),
                torch.as_tensor(terminated, device=self.device), torch.as_tensor(truncated, device=self.device), extras)


    def close(self) -> None:
        self.gym_env.close()
