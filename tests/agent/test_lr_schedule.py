"""The actor's step size: ``lr_schedule`` (``adaptive_iteration``: the KL rule once per iteration, to the
iteration's mean KL), the log-std learning rate, and the ``target_kl`` guard."""

import pytest
import torch

from simppo.agent.config import PPOAgentConfig
from simppo.agent.ppo import PPO
from simppo.envs.pendulum import PendulumEnv, PendulumEnvCfg
from tests.helpers import cpu_fabric, small_agent_cfg


def _one_update(**cfg) -> tuple[PPO, dict[str, torch.Tensor]]:
    """A pendulum agent after one rollout and one ``optimize_model``; its metrics."""
    torch.manual_seed(0)
    agent = PPO(cpu_fabric(), PendulumEnv(PendulumEnvCfg(), num_envs=8, seed=0), small_agent_cfg(num_steps=8, **cfg))
    agent.setup()
    agent.collect_rollout()
    return agent, agent.optimize_model()


def _lr_after_one_update(**cfg) -> tuple[float, float]:
    agent, metrics = _one_update(**cfg)
    return float(agent.actor_lr), float(metrics["actor/kl"])


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


def test_log_std_learns_at_its_scale_of_the_actor_lr():
    """Adam's first step moves each entry by ~lr (|g| >> eps): the log-std by ``log_std_lr_scale`` x actor_lr."""
    lr = 1e-4
    for scale in (1.0, 10.0):
        torch.manual_seed(0)
        cfg = small_agent_cfg(num_steps=8, num_mini_epochs=1, num_minibatches=1, lr_schedule="fixed", actor_lr=lr,
                              log_std_lr_scale=scale)
        agent = PPO(cpu_fabric(), PendulumEnv(PendulumEnvCfg(), num_envs=8, seed=0), cfg)
        agent.setup()
        agent.collect_rollout()
        before = agent.model.actor.log_std.detach().clone()
        agent.optimize_model()
        step = (agent.model.actor.log_std.detach() - before).abs()
        assert step.max() == pytest.approx(scale * lr, rel=1e-2)


def test_log_std_lr_follows_the_adaptive_schedule():
    assert PPOAgentConfig().log_std_lr_scale == PPOAgentConfig(exploration="per_motion").log_std_lr_scale == 1.0
    with pytest.raises(ValueError, match="log_std_lr_scale"):
        PPOAgentConfig(log_std_lr_scale=0.0)
    torch.manual_seed(0)
    agent = PPO(cpu_fabric(), PendulumEnv(PendulumEnvCfg(), num_envs=8, seed=0),
                small_agent_cfg(num_steps=8, lr_schedule="adaptive_iteration", desired_kl=1e3, log_std_lr_scale=4.0))
    agent.setup()
    agent.collect_rollout()
    agent.optimize_model()
    groups = {g["name"]: g for g in agent.actor_optimizer.param_groups}
    assert float(groups["actor"]["lr"]) == pytest.approx(3e-3 * 1.5, rel=1e-6)
    assert float(groups["log_std"]["lr"]) == pytest.approx(4.0 * 3e-3 * 1.5, rel=1e-6)
    assert groups["log_std"]["params"] == [agent.model.actor.log_std]


def _mini_epochs_run(**cfg) -> float:
    return float(_one_update(**cfg)[1]["actor/mini_epochs"])


def test_target_kl_stops_the_remaining_epochs_and_is_a_guard_by_default():
    """``target_kl`` is checked after each epoch (its mean KL); the default 0.15 is far above the KL of one
    small pendulum update, so a healthy iteration runs every epoch."""
    assert PPOAgentConfig().target_kl == 0.15
    assert _mini_epochs_run(lr_schedule="fixed", num_mini_epochs=5, target_kl=1e-12) == 1.0
    assert _mini_epochs_run(lr_schedule="fixed", num_mini_epochs=5, target_kl=None) == 5.0
    assert _mini_epochs_run(lr_schedule="fixed", num_mini_epochs=5, target_kl=0.15, actor_lr=1e-5) == 5.0


def _start_lr(num_envs: int, **cfg) -> tuple[float, float, float]:
    """The actor's, log-std's and critic's rates of a fresh pendulum agent of ``num_envs`` envs x 8 steps."""
    agent = PPO(cpu_fabric(), PendulumEnv(PendulumEnvCfg(), num_envs=num_envs, seed=0),
                small_agent_cfg(num_steps=8, lr_schedule="fixed", actor_lr=1e-4, critic_lr=1e-3, **cfg))
    agent.setup()
    groups = {g["name"]: float(g["lr"]) for g in agent.actor_optimizer.param_groups}
    assert groups["actor"] == float(agent.actor_lr)
    return groups["actor"], groups["log_std"], float(agent.critic_optimizer.param_groups[0]["lr"])


def test_the_actor_lr_is_scaled_by_the_square_root_of_the_batch_over_the_reference_batch():
    """``lr_batch_scaling=sqrt``: a batch 16x the reference starts the actor (and its log-std) at 4x ``actor_lr``, the
    reference batch at ``actor_lr`` itself, a quarter of it at half; the critic keeps its rate; ``none`` keeps all."""
    sqrt = {"lr_batch_scaling": "sqrt", "lr_reference_batch": 64}
    assert _start_lr(8, **sqrt) == pytest.approx((1e-4, 1e-4, 1e-3))  # 8 envs x 8 steps: the reference
    assert _start_lr(128, **sqrt) == pytest.approx((4e-4, 4e-4, 1e-3))
    assert _start_lr(2, **sqrt) == pytest.approx((0.5e-4, 0.5e-4, 1e-3))
    assert _start_lr(128, lr_batch_scaling="none") == pytest.approx((1e-4, 1e-4, 1e-3))
    assert (PPOAgentConfig().lr_batch_scaling, PPOAgentConfig().lr_reference_batch) == ("sqrt", 256 * 24)
    with pytest.raises(ValueError, match="lr_batch_scaling"):
        PPOAgentConfig(lr_batch_scaling="linear")
    with pytest.raises(ValueError, match="lr_reference_batch"):
        PPOAgentConfig(lr_reference_batch=0)
