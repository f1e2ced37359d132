"""No host syncs inside a rollout step or a minibatch update (counted by monkeypatching Tensor)."""

import torch

from simppo.agent.ppo import PPO
from simppo.envs.pendulum import PendulumEnv, PendulumEnvCfg
from tests.helpers import SyncCounter, cpu_fabric, small_agent_cfg


def count_agent_syncs(agent, monkeypatch) -> dict:
    agent.model.eval()
    for step in range(agent.num_steps):  # warm-up rollout (fills the buffer)
        agent.rollout_step(step)
    agent.compute_advantages()
    data = agent.experience_buffer.flat()
    idx = torch.randperm(agent.num_steps * agent.num_envs)[:64]
    batch = {k: v[idx] for k, v in data.items()}
    counter = SyncCounter(monkeypatch)
    with counter:
        agent.rollout_step(0)
    rollout = dict(counter.counts)
    agent.model.train()
    with counter:
        agent.perform_optimization_step(batch)
    return {"rollout": rollout, "update": {k: counter.counts[k] - rollout[k] for k in rollout}}


def test_rollout_step_and_minibatch_update_make_no_host_sync(monkeypatch):
    torch.manual_seed(0)
    env = PendulumEnv(PendulumEnvCfg(), num_envs=16, seed=0)
    cfg = small_agent_cfg(num_steps=8, lambda_l2c2=0.1, lr_schedule="adaptive", target_kl=0.05)
    agent = PPO(cpu_fabric(), env, cfg)
    agent.setup()
    counts = count_agent_syncs(agent, monkeypatch)
    assert counts == {"rollout": dict.fromkeys(SyncCounter.NAMES, 0),
                      "update": dict.fromkeys(SyncCounter.NAMES, 0)}, counts


def test_sync_counter_detects_syncs(monkeypatch):
    counter = SyncCounter(monkeypatch)
    with counter:
        t = torch.ones(2)
        t.sum().item()
        bool(t[0])
        t.tolist()
    assert counter.counts["item"] == 1 and counter.counts["__bool__"] == 1 and counter.counts["tolist"] == 1


def test_the_counter_sees_every_kind_of_host_read(monkeypatch):
    from tests.helpers import SyncCounter

    t, mask = torch.arange(4.0), torch.tensor([True, False, True, False])
    with SyncCounter(monkeypatch) as c:
        float(t[0]), int(t[1]), bool(t[2] > 0), t.nonzero(), t[mask], t.sum().item(), t.tolist()
    assert c.counts["__float__"] == 1 and c.counts["__int__"] == 1 and c.counts["nonzero"] == 1
    assert c.counts["mask_index"] == 1 and c.counts["item"] == 1 and c.counts["tolist"] == 1
    assert c.counts["__bool__"] >= 1
