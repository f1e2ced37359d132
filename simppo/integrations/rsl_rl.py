"""rsl_rl (``rsl-rl-lib`` 5.x) on a simppo env::

    env = RslRlVecEnv(simppo.make_env("humanoid_imitation", 4096, "cuda"))
    runner = OnPolicyRunner(env, tracking_runner_cfg(), log_dir="runs/rsl_rl", device="cuda")
    runner.learn(num_learning_iterations=1000)

:class:`RslRlVecEnv` gives simppo's ``VecEnv`` rsl_rl's ``VecEnv`` interface: ``get_observations()`` is a
``TensorDict`` with the ``policy`` (actor) and ``critic`` groups, ``step(actions)`` returns ``(obs, rewards, dones,
extras)`` with ``extras["time_outs"]`` (truncations that are not terminations) and ``extras["log"]`` (moving means
of the env's episode statistics, device scalars). Everything stays on the env's device. rsl_rl's runner steps the
env inside ``torch.inference_mode()``: the adapter hands back fresh copies (rsl_rl keeps the observation of a step
until after the next one), and the env's own buffers, allocated outside it, are only written in place.
"""

from __future__ import annotations

import dataclasses

import torch

from simppo.envs.base import VecEnv
from simppo.integrations import require
from simppo.integrations.episodes import EpisodeMeans

rsl_rl_env = require("rsl_rl.env", "rsl_rl")
tensordict = require("tensordict", "rsl_rl")


def tracking_runner_cfg(**changes) -> dict:
    """rsl_rl 5.x's train config for motion tracking as BeyondMimic / mjlab ship it for the G1 (24 steps per env,
    5 epochs of 4 minibatches, adaptive learning rate from 1e-3 at KL 0.01, entropy 0.005, [512, 256, 128] ELU MLPs
    with observation normalization, initial σ 1); ``changes`` replace top-level keys."""
    cfg = {
        "num_steps_per_env": 24,
        "save_interval": 500,
        "check_for_nan": True,
        "obs_groups": {"actor": ["policy"], "critic": ["critic"]},
        "actor": {"class_name": "MLPModel", "hidden_dims": [512, 256, 128], "activation": "elu",
                  "obs_normalization": True,
                  "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0, "std_type": "scalar"}},
        "critic": {"class_name": "MLPModel", "hidden_dims": [512, 256, 128], "activation": "elu",
                   "obs_normalization": True},
        "algorithm": {"class_name": "PPO", "value_loss_coef": 1.0, "use_clipped_value_loss": True, "clip_param": 0.2,
                      "entropy_coef": 0.005, "num_learning_epochs": 5, "num_mini_batches": 4, "learning_rate": 1e-3,
                      "schedule": "adaptive", "gamma": 0.99, "lam": 0.95, "desired_kl": 0.01, "max_grad_norm": 1.0},
        "logger": "tensorboard",
    }
    cfg.update(changes)
    return cfg


class RslRlVecEnv(rsl_rl_env.VecEnv):
    """simppo ``VecEnv`` → rsl_rl ``VecEnv`` (see the module)."""

    def __init__(self, env: VecEnv):
        self.env = env
        self.num_envs, self.num_actions = env.num_envs, env.num_actions
        self.device = env.device
        self.max_episode_length = int(getattr(env, "max_episode_steps", 0) or env.cfg.max_episode_steps)
        source = getattr(env, "train_cfg", None) or env.cfg
        self.cfg = dataclasses.asdict(source) if dataclasses.is_dataclass(source) else dict(source)
        self._episodes = EpisodeMeans()
        self._obs = self._wrap(env.reset())  # allocates the env's lazily built buffers outside inference mode

    @property
    def episode_length_buf(self) -> torch.Tensor:
        """The env's ``[N]`` step count of each episode (rsl_rl may overwrite it to spread the first time-outs)."""
        return self.env.episode_length

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self.env.episode_length.copy_(value)

    def _wrap(self, obs: dict[str, torch.Tensor]):
        return tensordict.TensorDict({"policy": obs["obs"].clone(), "critic": obs["critic_obs"].clone()},
                                     batch_size=[self.num_envs], device=self.device)

    def get_observations(self):
        return self._wrap(self.env.get_observations())

    def step(self, actions: torch.Tensor):
        obs, reward, terminated, truncated, extras = self.env.step(actions)
        done = terminated | truncated
        means = self._episodes.update(extras.get("episode", {}), done)
        out = {"time_outs": truncated & ~terminated,
               "log": {f"/episode/{k}": v.clone() for k, v in means.items()}}
        return self._wrap(obs), reward.clone(), done.to(torch.long), out

    def close(self) -> None:
        self.env.close()
