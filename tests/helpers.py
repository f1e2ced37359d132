"""Shared test helpers (``from tests.helpers import ...``)."""

import math

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
    """Counts the tensor operations that read a value on the host while active (monkeypatched): ``item``, ``cpu``,
    ``numpy``, ``tolist``, ``bool()`` / ``float()`` / ``int()`` of a tensor, ``nonzero`` and indexing with a boolean
    mask (``mask_index``: its result's size depends on the values)."""

    NAMES = ("item", "cpu", "numpy", "tolist", "__bool__", "__float__", "__int__", "nonzero", "mask_index")

    def __init__(self, monkeypatch):
        self.counts = dict.fromkeys(self.NAMES, 0)
        self._mp = monkeypatch
        self.active = False
        self.trace = False
        for name in self.NAMES[:-1]:
            original = getattr(torch.Tensor, name)

            def wrapper(t, *a, _orig=original, _name=name, **k):
                if self.active:
                    self.counts[_name] += 1
                    if self.trace:
                        import traceback

                        traceback.print_stack(limit=6)
                return _orig(t, *a, **k)

            monkeypatch.setattr(torch.Tensor, name, wrapper)
        getitem = torch.Tensor.__getitem__

        def masked(index) -> bool:
            parts = index if isinstance(index, tuple) else (index,)
            return any(isinstance(p, torch.Tensor) and p.dtype == torch.bool for p in parts)

        def get_item(t, index):
            if self.active and masked(index):
                self.counts["mask_index"] += 1
            return getitem(t, index)

        monkeypatch.setattr(torch.Tensor, "__getitem__", get_item)

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


@torch.no_grad()
def play_from_start(policy, env, motion_id: int, max_steps: int) -> dict[str, float]:
    """Run every copy of a humanoid-imitation ``env`` from t = 0 of ``motion_id`` with the mean action
    (:meth:`PPOModel.act_inference`, no exploration noise). ``policy``: a :class:`PPOModel` or a set-up ``PPO``.

    Returns ``survival_s`` (mean time until the first termination, capped at ``max_steps``) and
    ``body_pos_error`` (mean tracked-body distance in metres, anchor-aligned as in the reward, as the env
    writes it in ``env.errors``, averaged over the steps each env survived). Envs that end are auto-reset
    by the env and ignored afterwards.
    """
    from simppo.agent.models import PPOModel
    from simppo.kernels.imitation.spec import ERROR_INDEX

    model = policy if isinstance(policy, PPOModel) else policy.model
    n = env.num_envs
    obs = env.reset_to(torch.full((n,), motion_id, dtype=torch.int32, device=env.device),
                       torch.zeros(n, device=env.device))
    alive = torch.ones(n, dtype=torch.bool, device=env.device)
    steps = torch.zeros(n, device=env.device)
    err_sum = torch.zeros(n, device=env.device)
    for _ in range(max_steps):
        obs, _, terminated, _, _ = env.step(model.act_inference(obs))
        err = env.errors[:, ERROR_INDEX["body_pos"]]
        err_sum += torch.where(alive, err, torch.zeros_like(err))
        steps += alive.float()
        alive &= ~terminated
    survival = steps * env.dt
    return {
        "survival_s": float(survival.mean()),
        "body_pos_error": float((err_sum / steps.clamp_min(1.0)).mean()),
        "survived_all": float(alive.float().mean()),
        "max_s": max_steps * env.dt if math.isfinite(env.dt) else float("nan"),
    }
