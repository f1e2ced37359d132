"""``agent.update_precision``: what ``auto`` resolves to, and one precision for the rollout and the update.

The PPO ratio compares the update's log-probs with those the rollout recorded; if the rollout's forward ran in
another precision than the update's, the ratio of an unchanged policy would be rounding noise (at σ = 0.15 a
bf16-vs-fp32 mean puts ~45 % of the samples outside the clip range). Here the first minibatch's log-probs must
equal the rollout's to the bit, in fp32 and in bf16.
"""

import pytest
import torch

from simppo.agent import losses as L
from simppo.agent import precision as P
from simppo.agent.config import ActorCfg, MLPCfg
from simppo.agent.ppo import PPO
from simppo.envs.pendulum import PendulumEnv, PendulumEnvCfg
from tests.helpers import cpu_fabric, small_agent_cfg


@pytest.mark.parametrize("amx, expected", [(True, "bf16"), (False, "fp32")])
def test_auto_is_bf16_on_cpus_with_amx_only(monkeypatch, amx, expected):
    monkeypatch.setattr(P, "cpu_has_amx", lambda: amx)
    assert P.resolve_precision("auto", "cpu") == expected
    assert P.resolve_precision("auto", "cuda:0") == "fp32"
    assert P.resolve_precision("fp32", "cpu") == "fp32" and P.resolve_precision("bf16", "cuda:1") == "bf16"


def test_unknown_precision_is_refused_by_name():
    with pytest.raises(ValueError, match="update_precision.*'fp16'"):
        P.resolve_precision("fp16", "cpu")


def _agent_after_rollout(precision: str) -> PPO:
    torch.manual_seed(0)
    cfg = small_agent_cfg(num_steps=8, update_precision=precision,
                          actor=ActorCfg(units=[256, 128], init_log_std=-2.0), critic=MLPCfg(units=[256, 128]))
    agent = PPO(cpu_fabric(), PendulumEnv(PendulumEnvCfg(), num_envs=32, seed=0), cfg)
    agent.setup()
    with torch.no_grad():  # action means of a trained size (|mean| ~ 1.7), where rounding shows in the ratio
        agent.model.actor.mu[-1].weight.normal_(0.0, 0.5)
    agent.collect_rollout()
    return agent


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_first_minibatch_ratio_is_exactly_one(precision):
    agent = _agent_after_rollout(precision)
    assert agent.precision == precision
    agent.model.train()
    data = agent.experience_buffer.flat()
    idx = torch.randperm(agent.num_steps * agent.num_envs)[:64]
    batch = {k: v.index_select(0, idx) for k, v in data.items()}
    with agent.mlp_autocast():
        mean, log_std = agent.actor(batch["obs"])
        values = agent.critic(batch["critic_obs"])
    assert mean.requires_grad  # the update's (training) forward
    logp = L.gaussian_log_prob(batch["actions"], mean.float(), log_std)
    assert torch.equal(logp, batch["logp"])
    assert torch.equal(values.float(), batch["values"])


def test_bf16_rollout_records_the_bf16_policy():
    agent = _agent_after_rollout("bf16")
    obs = agent.experience_buffer["obs"][0]
    with torch.no_grad():
        fp32_mean = agent.actor(obs)[0]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            bf16_mean = agent.actor(obs)[0].float()
    recorded = agent.experience_buffer["mean"][0]
    assert torch.equal(recorded, bf16_mean)
    assert not torch.equal(recorded, fp32_mean)
    torch.testing.assert_close(recorded, fp32_mean, rtol=0.02, atol=0.02)  # bf16 keeps 8 mantissa bits


def test_bf16_training_is_deterministic():
    runs = []
    for _ in range(2):
        agent = _agent_after_rollout("bf16")
        agent.optimize_model()
        runs.append(torch.cat([p.detach().reshape(-1) for p in agent.model.parameters()]))
    assert torch.equal(*runs)
