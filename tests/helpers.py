"""Shared test helpers (``from tests.helpers import ...``)."""

import subprocess
import sys

import torch
from lightning_fabric import Fabric

from simppo.agent.config import ActorCfg, MLPCfg, PPOAgentConfig


def cpu_fabric() -> Fabric:
    return Fabric(accelerator="cpu", devices=1, precision="32-true")


def small_agent_cfg(**overrides) -> PPOAgentConfig:
    cfg = PPOAgentConfig(
        num_steps=32, num_mini_epochs=5, num_minibatches=4, gamma=0.95, tau=0.95, entropy_coef=0.0,
        actor_lr=3e-3, critic_lr=3e-3, lr_schedule="adaptive", lr_batch_scaling="none", bounds_loss_coef=1.0,
        actor=ActorCfg(units=[64, 64], init_log_std=-0.5), critic=MLPCfg(units=[64, 64]),
    )
    for k, v in overrides.items():
        setattr(cfg, k, v)
    return cfg


def train_setup(overrides: list[str], device: str):
    """``(cfg, env, agent)`` as ``simppo-train`` builds them in one process (:func:`build_training`)."""
    from simppo.cli.train import build_training

    return build_training(overrides, device)


class SyncCounter:
    """Counts the tensor operations that read a value on the host while active (monkeypatched): ``item``, ``cpu``,
    ``numpy``, ``tolist``, ``bool()`` / ``float()`` / ``int()`` of a tensor, ``nonzero`` and indexing with a boolean
    mask (``mask_index``: its result's size depends on the values), and JAX arrays read on the host
    (``jax_to_host``, sim=mjx)."""

    NAMES = ("item", "cpu", "numpy", "tolist", "__bool__", "__float__", "__int__", "nonzero", "mask_index",
             "jax_to_host")
    TORCH_NAMES = NAMES[:-2]

    def __init__(self, monkeypatch):
        self.counts = dict.fromkeys(self.NAMES, 0)
        self._mp = monkeypatch
        self.active = False
        self.trace = False
        for name in self.TORCH_NAMES:
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
        self._count_jax_reads(monkeypatch)

    JAX_NAMES = ("__array__", "item", "tolist", "__bool__", "__float__", "__int__")

    def _count_jax_reads(self, monkeypatch) -> None:
        """sim=mjx: JAX arrays read on the host count too (``jax_to_host``: ``np.asarray``, ``item``, ...,
        ``jax.device_get``); DLPack views are not reads."""
        try:
            import jax
            from jax._src.array import ArrayImpl
        except ImportError:
            return

        def counted(original):
            def wrapper(*a, **k):
                if self.active:
                    self.counts["jax_to_host"] += 1
                return original(*a, **k)

            return wrapper

        for name in self.JAX_NAMES:
            monkeypatch.setattr(ArrayImpl, name, counted(getattr(ArrayImpl, name)))
        monkeypatch.setattr(jax, "device_get", counted(jax.device_get))

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


def play_clips(cfg, model, num_motions: int, copies: int = 1, device: str = "cpu", max_body_error_m: float = 0.5,
               **eval_env_options) -> list:
    """Every motion of ``cfg.motion`` (``num_motions`` of them), each ``copies`` times, played from t = 0 with the
    mean action by simppo-eval's evaluator (:func:`build_eval_env` + :func:`evaluate_motions`): one
    :class:`MotionResult` per play, motion by motion. ``eval_env_options``: ``sim_name``, ``randomization``,
    ``obs_noise`` of :func:`build_eval_env` (each copy draws its own randomization); ``max_body_error_m`` as in
    :func:`evaluate_motions` (``math.inf``: the env's terminations alone fail a play)."""
    import copy

    from simppo.eval.loading import build_eval_env
    from simppo.eval.metrics import evaluate_motions

    env = build_eval_env(cfg, num_motions * copies, device, **eval_env_options)
    policy = copy.deepcopy(model).to(device).eval()
    try:
        return evaluate_motions(env, policy.act_inference, list(range(num_motions)), plays=copies,
                                max_body_error_m=max_body_error_m)
    finally:
        env.close()


def run_fresh_python(code: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run ``code`` with ``python -c`` in a new process (nothing imported or initialised yet); it must succeed."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc
