"""Issue 13, defect 1: one unstable world must not poison training.

NaN is written into one world's ``qvel`` in the middle of a rollout. The step flags it (terminated, zero
reward, zero terminal observation), counts it once (``extras["num_unstable"]`` is taken before the resets
re-run the guard), resets it, and PPO keeps every parameter, optimizer state and normalizer finite; the
iteration logs ``env/num_unstable`` = 1.
"""

import pytest
import torch

from simppo.agent.config import ActorCfg, MLPCfg
from simppo.agent.normalizers import RewardNormalizer, RunningMeanStd
from simppo.agent.ppo import PPO
from simppo.envs.imitation import HumanoidImitationEnv, HumanoidImitationEnvCfg
from simppo.sim.config import SimCfg
from tests.helpers import cpu_fabric, small_agent_cfg

WORLD = 3
INJECT_AT = 6  # env step 6 = the second step of the second iteration (num_steps = 4)


def all_finite(tensors) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in tensors if t.is_floating_point())


def training_tensors(agent: PPO):
    yield from agent.model.state_dict().values()  # weights and observation normalizers
    yield from agent.reward_normalizer.state_dict().values()
    for opt in (agent.actor_optimizer, agent.critic_optimizer):
        for st in opt.state.values():
            yield from (v for v in st.values() if isinstance(v, torch.Tensor))


@pytest.mark.parametrize("sim", ["mjwarp", "mujoco"])
def test_nan_in_one_world_mid_rollout_is_counted_reset_and_kept_out(sim):
    torch.manual_seed(0)
    env = HumanoidImitationEnv(HumanoidImitationEnvCfg(), num_envs=8, device="cpu", seed=0, sim_cfg=SimCfg(name=sim))
    cfg = small_agent_cfg(num_steps=4, num_minibatches=2, num_mini_epochs=2, actor=ActorCfg(units=[32, 32]),
                          critic=MLPCfg(units=[32, 32]))
    agent = PPO(cpu_fabric(), env, cfg)
    agent.setup()
    real_step, calls, seen = env.step, [0], {}

    def step(actions):
        calls[0] += 1
        if calls[0] == INJECT_AT:
            env.sim.qvel[WORLD, :] = float("nan")
        obs, reward, terminated, truncated, extras = real_step(actions)
        if calls[0] == INJECT_AT:
            seen.update(reward=reward.clone(), terminated=terminated.clone(),
                        unstable=extras.get("unstable", torch.zeros(8, dtype=torch.bool)).clone(),
                        num_unstable=extras["num_unstable"].clone(),
                        terminal_obs=extras["terminal_obs"]["critic_obs"].clone(), obs=obs["critic_obs"].clone(),
                        sim_unstable=env.sim.unstable.clone(), qvel=env.sim.qvel.clone(),
                        episode_length=env.episode_length.clone())
        return obs, reward, terminated, truncated, extras

    env.step = step
    metrics = [agent.train_iteration() for _ in range(3)]

    # training went on with finite numbers everywhere
    assert agent.epoch == 3
    assert all_finite(training_tensors(agent))
    assert all(torch.isfinite(torch.tensor(v)) for m in metrics for v in m.values())
    # the step flagged the world: terminated, zero reward, zero terminal observation (sanitised in the kernels)
    assert bool(seen["terminated"][WORLD]) and float(seen["reward"][WORLD]) == 0.0
    assert all_finite([seen["reward"], seen["terminal_obs"], seen["obs"], seen["qvel"]])
    assert bool((seen["terminal_obs"][WORLD] == 0).all())
    # the world was reset: stable again, a fresh episode
    assert int(seen["sim_unstable"][WORLD]) == 0 and int(seen["episode_length"][WORLD]) == 0
    # counted once, in the step and in the iteration's log
    assert int(seen["num_unstable"][0]) == 1
    assert seen["unstable"].tolist() == [i == WORLD for i in range(8)]
    assert [m["env/num_unstable"] for m in metrics] == [0, 1, 0]


def test_running_mean_std_mask_keeps_rows_out():
    rms = RunningMeanStd((2,))
    x = torch.tensor([[1.0, 2.0], [float("nan"), float("inf")], [3.0, 6.0]])
    rms.update(x, mask=torch.tensor([True, False, True]))
    ref = RunningMeanStd((2,))
    ref.update(x[[0, 2]])
    torch.testing.assert_close(rms.mean, ref.mean)
    torch.testing.assert_close(rms.var, ref.var)
    assert float(rms.count) == 2.0
    before = {k: v.clone() for k, v in rms.state_dict().items()}
    rms.update(x, mask=torch.zeros(3, dtype=torch.bool))  # nothing valid: unchanged
    for k, v in rms.state_dict().items():
        torch.testing.assert_close(v, before[k])
    fresh = RunningMeanStd(())
    fresh.update(torch.tensor([float("nan")]), mask=torch.tensor([False]))
    assert float(fresh.var) == 1.0 and float(fresh.count) == 0.0


def test_reward_normalizer_ignores_invalid_envs():
    rn = RewardNormalizer(num_envs=3, gamma=0.9)
    out = rn(torch.tensor([1.0, float("nan"), 2.0]), torch.tensor([0.0, 1.0, 0.0]),
             valid=torch.tensor([True, False, True]))
    assert bool(torch.isfinite(out).all()) and float(out[1]) == 0.0
    assert all(bool(torch.isfinite(v).all()) for v in rn.state_dict().values())
    assert float(rn.return_rms.count) == 2.0
