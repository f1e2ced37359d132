"""``TorchRLEnv``: TorchRL's own spec check passes on simppo's envs, and a plain TorchRL PPO loop (its collector,
``GAE`` and ``ClipPPOLoss``) runs on it."""

import pytest
import torch
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn
from torchrl.collectors import Collector
from torchrl.envs.utils import check_env_specs
from torchrl.modules import ProbabilisticActor, TanhNormal, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

import simppo
from simppo.integrations.torchrl import TorchRLEnv

N = 8


@pytest.mark.parametrize("name", ["pendulum", "humanoid_imitation"])
def test_torchrl_spec_check_passes(name):
    env = TorchRLEnv(simppo.make_env(name, 4, "cpu"))
    check_env_specs(env)
    env.close()


def test_ended_episodes_report_their_last_observation_then_restart():
    env = TorchRLEnv(simppo.make_env("pendulum", N, "cpu", **{"env.max_episode_steps": 3}))
    td = env.reset()
    for _ in range(3):
        td["action"] = torch.full((N, 1), 0.4)
        out, td = env.step_and_maybe_reset(td)
    nxt = out["next"]
    assert bool(nxt["truncated"].all()) and bool(nxt["done"].all())
    last, first = nxt["observation"], td["observation"]  # the ended episode's last, the new one's first
    assert not torch.allclose(last, first)
    assert not bool(td["done"].any())  # after the partial reset every env runs again
    with pytest.raises(ValueError, match="built with seed 0"):
        env.set_seed(5)


def test_a_plain_torchrl_ppo_loop_runs_two_batches():
    env = TorchRLEnv(simppo.make_env("pendulum", N, "cpu"))
    obs_dim, act_dim = env.observation_spec["observation"].shape[-1], env.action_spec.shape[-1]
    policy_net = nn.Sequential(nn.Linear(obs_dim, 32), nn.Tanh(), nn.Linear(32, 2 * act_dim), NormalParamExtractor())
    actor = ProbabilisticActor(TensorDictModule(policy_net, in_keys=["observation"], out_keys=["loc", "scale"]),
                               in_keys=["loc", "scale"], distribution_class=TanhNormal, return_log_prob=True,
                               spec=env.action_spec)
    critic = ValueOperator(nn.Sequential(nn.Linear(obs_dim, 32), nn.Tanh(), nn.Linear(32, 1)), in_keys=["observation"])
    collector = Collector(env, actor, frames_per_batch=N * 16, total_frames=N * 32)
    advantage = GAE(gamma=0.99, lmbda=0.95, value_network=critic)
    loss = ClipPPOLoss(actor, critic)
    optim = torch.optim.Adam(loss.parameters(), lr=1e-3)
    batches = 0
    for data in collector:
        assert data.batch_size == torch.Size([N, 16])
        advantage(data)
        losses = loss(data.reshape(-1))
        total = losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]
        optim.zero_grad()
        total.backward()
        optim.step()
        assert torch.isfinite(total)
        batches += 1
    collector.shutdown()
    assert batches == 2


def test_a_torchrl_env_drives_like_the_simppo_env_it_wraps():
    from simppo.integrations.torchrl import FromTorchRL

    direct = simppo.make_env("pendulum", N, "cpu", **{"env.max_episode_steps": 4})
    wrapped = FromTorchRL(TorchRLEnv(simppo.make_env("pendulum", N, "cpu", **{"env.max_episode_steps": 4})))
    assert torch.equal(direct.reset()["obs"], wrapped.reset()["obs"])
    for t in range(6):
        a = torch.full((N, 1), 0.1 * t)
        od, rd, td, trd, ed = direct.step(a)
        ow, rw, tw, trw, ew = wrapped.step(a)
        assert torch.equal(od["obs"], ow["obs"]) and torch.equal(rd, rw)
        assert torch.equal(td, tw) and torch.equal(trd, trw)
        assert torch.equal(ed["terminal_obs"]["obs"], ew["terminal_obs"]["obs"])
    assert torch.equal(ew["episode"]["length"], torch.full((N,), 2.0))  # the episodes begun at step 4
