"""``lr_schedule=adaptive_iteration``: the KL rule applied once per iteration, to the iteration's mean KL."""

import pytest
import torch

from simppo.agent.config import PPOAgentConfig
from simppo.agent.ppo import PPO
from simppo.envs.pendulum import PendulumEnv, PendulumEnvCfg
from tests.helpers import cpu_fabric, small_agent_cfg


def _lr_after_one_update(**cfg) -> tuple[float, float]:
    torch.manual_seed(0)
    agent = PPO(cpu_fabric(), PendulumEnv(PendulumEnvCfg(), num_envs=8, seed=0), small_agent_cfg(num_steps=8, **cfg))
    agent.setup()
    agent.collect_rollout()
    kl = float(agent.optimize_model()["actor/kl"])
    return float(agent.actor_lr), kl


def test_adaptive_iteration_changes_the_lr_once_per_iteration():
    lr0 = 3e-3
    up, kl = _lr_after_one_update(lr_schedule="adaptive_iteration", desired_kl=1e3)  # KL far below: x1.5 once
    assert kl < 0.5 * 1e3 and up == pytest.approx(lr0 * 1.5, rel=1e-6)
    down, _ = _lr_after_one_update(lr_schedule="adaptive_iteration", desired_kl=1e-9)  # far above: ÷1.5 once
    assert down == pytest.approx(lr0 / 1.5, rel=1e-6)
    per_minibatch, _ = _lr_after_one_update(lr_schedule="adaptive", desired_kl=1e-9)  # rsl_rl: every minibatch
    assert per_minibatch < down / 1.5 ** 5
    fixed, _ = _lr_after_one_update(lr_schedule="fixed", desired_kl=1e-9)
    assert fixed == pytest.approx(lr0, rel=1e-6)


def test_unknown_schedule_is_refused():
    with pytest.raises(ValueError, match="lr_schedule"):
        PPOAgentConfig(lr_schedule="cosine")
