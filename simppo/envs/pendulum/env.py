"""``env=pendulum``: torque-limited pendulum swing-up; dynamics, reward and auto-reset are Warp kernels."""

from dataclasses import dataclass

import torch
import warp as wp

from simppo.envs.base import VecEnv
from simppo.kernels import pendulum as K
from simppo.utils.device import on_torch_stream, warp_view


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
        self.actions = torch.zeros(num_envs, 1, **f32)
        self.params = K.PendulumParams()
        for key in ("max_torque", "max_speed", "dt", "gravity", "mass", "length"):
            setattr(self.params, key, float(getattr(cfg, key)))
        self.params.max_episode_steps, self.params.seed = int(cfg.max_episode_steps), self.seed
        self.buf = K.PendulumBuffers()
        for key in ("actions", "theta", "theta_dot", "episode_length", "episode_return", "reward", "terminal_obs",
                    "obs", "done_return", "done_length"):
            setattr(self.buf, key, warp_view(getattr(self, key)))
        self.buf.terminated = warp_view(self.terminated, wp.bool)
        self.buf.truncated = warp_view(self.truncated, wp.bool)
        self._obs_dict = {"obs": self.obs, "critic_obs": self.obs}
        self._extras = {
            "terminal_obs": {"obs": self.terminal_obs, "critic_obs": self.terminal_obs},
            "episode": {"reward": self.done_return, "length": self.done_length},
        }

    @on_torch_stream
    def reset(self) -> dict[str, torch.Tensor]:
        self.step_count += 1
        self.params.seed, self.params.step_count = self.seed, self.step_count
        K.reset(self.params, self.buf)
        return self._obs_dict

    @on_torch_stream
    def step(self, actions: torch.Tensor):
        self.step_count += 1
        self.params.seed, self.params.step_count = self.seed, self.step_count
        self.actions.copy_(actions.detach())
        K.step(self.params, self.buf)
        return self._obs_dict, self.reward, self.terminated, self.truncated, self._extras

    @on_torch_stream
    def get_observations(self) -> dict[str, torch.Tensor]:
        K.observe(self.buf)
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
