"""``agent.graph_update``: the minibatch step on static buffers (a CUDA graph on a GPU: tests/gpu) is the same
algorithm as the eager step. On the CPU the static step runs eagerly and must give the eager path's parameters bit
for bit after several iterations: the gather into static buffers, the in-place learning-rate schedule, the KL stop
and per-motion rows all pass through it."""

import warnings

import pytest
import torch

from simppo.agent.graphed_update import graph_update_available
from simppo.agent.ppo import PPO
from simppo.envs.pendulum import PendulumEnv, PendulumEnvCfg
from tests.helpers import cpu_fabric, small_agent_cfg, train_setup


def _trained(iterations: int = 3, **cfg) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    agent = PPO(cpu_fabric(), PendulumEnv(PendulumEnvCfg(), num_envs=64, seed=0), small_agent_cfg(num_steps=16, **cfg))
    agent.setup()
    for _ in range(iterations):
        agent.collect_rollout()
        agent.optimize_model()
    state = {k: v.clone() for k, v in agent.model.state_dict().items()}
    state["actor_lr"] = agent.algorithm.actor_lr.clone()
    for name, opt in (("actor", agent.algorithm.actor_optimizer), ("critic", agent.algorithm.critic_optimizer)):
        for i, s in enumerate(opt.state.values()):
            state.update({f"{name}_opt.{i}.{k}": v.clone() for k, v in s.items()})
    return state


@pytest.mark.parametrize("cfg", [
    {},  # the KL-adaptive learning rate of small_agent_cfg, changed in place inside the step
    {"lr_schedule": "fixed", "target_kl": 1e-4},  # the KL stop ends epochs early
    {"lr_schedule": "fixed", "lambda_l2c2": 0.5},  # random noise drawn inside the step
], ids=["adaptive_lr", "target_kl", "l2c2"])
def test_static_step_gives_the_eager_parameters_bit_for_bit(cfg):
    eager = _trained(**cfg)
    with pytest.warns(UserWarning, match="agent.graph_update: minibatch steps run eagerly on static buffers"):
        static = _trained(graph_update=True, **cfg)
    assert eager.keys() == static.keys()
    for k, v in eager.items():
        assert torch.equal(v, static[k]), k
    initial = _trained(iterations=0)
    assert not torch.equal(initial["actor.mu.0.weight"], eager["actor.mu.0.weight"])


@pytest.mark.parametrize("extra", [[], ["agent.symmetry_coef=1.0", "agent.symmetry_augment=true"]],
                         ids=["rows", "rows_and_symmetry"])
def test_per_motion_rows_through_the_static_step(extra):
    def run(graph: bool) -> dict[str, torch.Tensor]:
        overrides = ["logger=none", "experiment_name=t", "env=humanoid_imitation", "num_envs=8", "seed=3",
                     "agent.num_steps=8", "agent.exploration=per_motion",
                     f"agent.graph_update={str(graph).lower()}", "agent.actor.units=[32]", "agent.critic.units=[32]",
                     *extra]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            _, env, agent = train_setup(overrides, "cpu")
        for _ in range(2):
            agent.collect_rollout()
            agent.optimize_model()
        env.close()
        return {k: v.clone() for k, v in agent.model.state_dict().items()}

    eager, static = run(False), run(True)
    assert eager["actor.log_std"].shape[0] > 1  # one row per motion
    for k, v in eager.items():
        assert torch.equal(v, static[k]), k


def test_capture_is_only_offered_where_it_can_run():
    assert graph_update_available(torch.device("cpu"), 1, "fp32") == (False, "the device is cpu, not CUDA")
    ok, why = graph_update_available(torch.device("cuda", 0), 2, "fp32")
    assert not ok and "2 ranks" in why
    ok, why = graph_update_available(torch.device("cuda", 0), 1, "bf16")
    assert not ok and "bf16" in why
    assert graph_update_available(torch.device("cuda", 0), 1, "fp32") == (True, "")
