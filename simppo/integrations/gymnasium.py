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
