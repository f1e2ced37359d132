"""``env=pendulum``: torque-limited pendulum swing-up; dynamics, reward and auto-reset are Warp kernels."""

from dataclasses import dataclass

import torch

from simppo.envs.base import VecEnv
from simppo.kernels.pendulum import launch_pendulum_observe, launch_pendulum_reset, launch_pendulum_step


@dataclass
class PendulumEnvCfg:
    name: str = "pendulum"
    max_episode_steps: int = 100
    max_torque: float = 2.0
    max_speed: float = 8.0
    dt: float = 0.05
    gravity: float = 10.0
    mass: float = 1.0
    length: float = 1.0


class PendulumEnv(VecEnv):
    """``obs [N, 3]`` = (cos θ, sin θ, θ̇/8); one action in [-1, 1]; truncation after ``max_episode_steps``."""

    def __init__(self, cfg: PendulumEnvCfg, num_envs: int, device: str = "cpu", seed: int = 0):
        self.cfg = cfg
        self.num_envs = num_envs
        self.num_actions = 1
        self.device = device
        self.seed = int(seed)
        self.obs_dims = {"obs": 3, "critic_obs": 3}
        f32 = {"dtype": torch.float32, "device": device}
        self.theta = torch.zeros(num_envs, **f32)
        self.theta_dot = torch.zeros(num_envs, **f32)
        self.episode_length = torch.zeros(num_envs, dtype=torch.int32, device=device)
        self.episode_return = torch.zeros(num_envs, **f32)
        self.reward = torch.zeros(num_envs, **f32)
        self.terminated = torch.zeros(num_envs, dtype=torch.bool, device=device)
        self.truncated = torch.zeros(num_envs, dtype=torch.bool, device=device)
        self.obs = torch.zeros(num_envs, 3, **f32)
        self.terminal_obs = torch.zeros(num_envs, 3, **f32)
        self.done_return = torch.zeros(num_envs, **f32)
        self.done_length = torch.zeros(num_envs, **f32)
        self.step_count = 0  # host counter: seeds the per-step random stream, never read from the device
        self._obs_dict = {"obs": self.obs, "critic_obs": self.obs}
        self._extras = {
            "terminal_obs": {"obs": self.terminal_obs, "critic_obs": self.terminal_obs},
            "episode": {"reward": self.done_return, "length": self.done_length},
        }

    def reset(self) -> dict[str, torch.Tensor]:
        self.step_count += 1
        launch_pendulum_reset(self.seed, self.step_count, self.theta, self.theta_dot, self.episode_length,
                              self.episode_return, self.obs)
        return self._obs_dict

    def step(self, actions: torch.Tensor):
        self.step_count += 1
        c = self.cfg
        launch_pendulum_step(
            actions.contiguous(), self.seed, self.step_count, c.max_torque, c.max_speed, c.dt, c.gravity,
            c.mass, c.length, c.max_episode_steps, self.theta, self.theta_dot, self.episode_length,
            self.episode_return, self.reward, self.terminated, self.truncated, self.terminal_obs, self.obs,
            self.done_return, self.done_length,
        )
        return self._obs_dict, self.reward, self.terminated, self.truncated, self._extras

    def get_observations(self) -> dict[str, torch.Tensor]:
        launch_pendulum_observe(self.theta, self.theta_dot, self.obs)
        return self._obs_dict

    def state_dict(self) -> dict:
        return {
            "theta": self.theta.clone(),
            "theta_dot": self.theta_dot.clone(),
            "episode_length": self.episode_length.clone(),
            "episode_return": self.episode_return.clone(),
            "step_count": self.step_count,
            "seed": self.seed,
        }

    def load_state_dict(self, state: dict) -> None:
        self.theta.copy_(state["theta"])
        self.theta_dot.copy_(state["theta_dot"])
        self.episode_length.copy_(state["episode_length"])
        self.episode_return.copy_(state["episode_return"])
        self.step_count = int(state["step_count"])
        self.seed = int(state["seed"])
