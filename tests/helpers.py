"""Shared test helpers (``from tests.helpers import ...``)."""

import torch
from lightning_fabric import Fabric

from simppo.agent.config import ActorCfg, MLPCfg, PPOAgentConfig


def cpu_fabric() -> Fabric:
    return Fabric(accelerator="cpu", devices=1, precision="32-true")


def small_agent_cfg(**overrides) -> PPOAgentConfig:
    cfg = PPOAgentConfig(
        num_steps=32, num_mini_epochs=5, num_minibatches=4, gamma=0.95, tau=0.95, entropy_coef=0.0,
        actor_lr=3e-3, critic_lr=3e-3, lr_schedule="adaptive", bounds_loss_coef=1.0,
        actor=ActorCfg(units=[64, 64], init_log_std=-0.5), critic=MLPCfg(units=[64, 64]),
    )
    for k, v in overrides.items():
        setattr(cfg, k, v)
    return cfg


def train_setup(overrides: list[str], device: str):
    """``(cfg, env, agent)`` as ``simppo-train`` builds them in one process: Hydra's ``train`` config with
    ``overrides`` and ``device=<device>``, ``num_envs`` resolved per device kind when unset, the torch seed set,
    the env made and the PPO agent set up on ``fabric_for(device)``. For the slow learning checks."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from simppo.agent.ppo import PPO
    from simppo.cli.train import default_num_envs
    from simppo.config import register_configs
    from simppo.envs import make_env
    from simppo.paths import CONFIG_DIR
    from simppo.utils.device import fabric_for

    register_configs()
    with initialize_config_dir(version_base=None, config_dir=str(CONFIG_DIR)):
        node = compose("train", overrides=[*overrides, f"device={device}"])
    cfg = OmegaConf.to_object(node)
    if cfg.num_envs is None:
        cfg.num_envs = default_num_envs(device)
    torch.manual_seed(cfg.seed)
    env = make_env(cfg.env, cfg.num_envs, device=device, seed=cfg.seed, robot_cfg=cfg.robot, sim_cfg=cfg.sim,
                   motion_cfg=cfg.motion)
    agent = PPO(fabric_for(device), env, cfg.agent)
    agent.setup()
    return cfg, env, agent


class SyncCounter:
    """Counts Tensor.item/.cpu/.numpy/.tolist/__bool__ calls while active (monkeypatched)."""

    NAMES = ("item", "cpu", "numpy", "tolist", "__bool__")

    def __init__(self, monkeypatch):
        self.counts = dict.fromkeys(self.NAMES, 0)
        self._mp = monkeypatch
        self.active = False
        self.trace = False
        for name in self.NAMES:
            original = getattr(torch.Tensor, name)

            def wrapper(t, *a, _orig=original, _name=name, **k):
                if self.active:
                    self.counts[_name] += 1
                    if self.trace:
                        import traceback

                        traceback.print_stack(limit=6)
                return _orig(t, *a, **k)

            monkeypatch.setattr(torch.Tensor, name, wrapper)

    def __enter__(self):
        self.active = True
        return self

    def __exit__(self, *exc):
        self.active = False

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def assert_same_state(x, y, path: str = "state") -> None:
    """Nested states (dicts, lists, tensors, plain values) are bit-identical; the failing path is named."""
    if isinstance(x, torch.Tensor):
        assert torch.equal(x, y), path
    elif isinstance(x, dict):
        assert x.keys() == y.keys(), path
        for k in x:
            assert_same_state(x[k], y[k], f"{path}.{k}")
    elif isinstance(x, list | tuple):
        assert len(x) == len(y), path
        for i, (u, v) in enumerate(zip(x, y, strict=True)):
            assert_same_state(u, v, f"{path}[{i}]")
    else:
        assert x == y, path


def pendulum_agent(**cfg):
    """A set-up PPO agent on an 8-env pendulum (8-step episodes, ``small_agent_cfg(num_steps=8, **cfg)``), seed 0."""
    import torch

    from simppo.agent.ppo import PPO
    from simppo.envs.pendulum import PendulumEnv, PendulumEnvCfg

    torch.manual_seed(0)
    env = PendulumEnv(PendulumEnvCfg(max_episode_steps=8), num_envs=8, seed=0)
    agent = PPO(cpu_fabric(), env, small_agent_cfg(num_steps=8, **cfg))
    agent.setup()
    return agent
