"""rsl_rl's own ``OnPolicyRunner`` trains ``humanoid_imitation`` through ``RslRlVecEnv`` (a few iterations on the
CPU), stepping the env inside ``torch.inference_mode()`` as it does; the env and its tensors stay usable outside."""

import torch
from rsl_rl.runners import OnPolicyRunner

import simppo
from simppo.integrations.rsl_rl import RslRlVecEnv, tracking_runner_cfg

N = 8


def test_on_policy_runner_trains_the_humanoid_and_the_env_works_outside_inference_mode():
    env = RslRlVecEnv(simppo.make_env("humanoid_imitation", N, "cpu", seed=1))
    obs = env.get_observations()
    assert obs["policy"].shape == (N, env.env.obs_dims["obs"]) and obs["critic"].shape == (N, env.env.obs_dims[
        "critic_obs"])
    assert env.max_episode_length == env.env.max_episode_steps and isinstance(env.cfg, dict)
    cfg = tracking_runner_cfg(num_steps_per_env=6)
    for part in ("actor", "critic"):
        cfg[part]["hidden_dims"] = [32, 32]
    runner = OnPolicyRunner(env, cfg, log_dir=None, device="cpu")
    before = {k: v.clone() for k, v in runner.alg.actor.state_dict().items()}
    runner.learn(num_learning_iterations=3, init_at_random_ep_len=True)
    after = runner.alg.actor.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)  # it learned something
    assert all(torch.isfinite(v).all() for v in after.values())
    # outside inference mode: the env steps, and what it hands back can enter autograd
    obs, rew, dones, extras = env.step(torch.zeros(N, env.num_actions))
    w = torch.ones(obs["policy"].shape[1], requires_grad=True)
    (obs["policy"] @ w).sum().backward()
    assert w.grad is not None and dones.dtype == torch.long and rew.shape == (N,)
    assert extras["time_outs"].dtype == torch.bool and all(torch.isfinite(v) for v in extras["log"].values())
    assert "/episode/reward" in extras["log"]


def test_observations_handed_back_are_not_overwritten_by_the_next_step():
    env = RslRlVecEnv(simppo.make_env("pendulum", 4, "cpu"))
    first = env.get_observations()
    kept = first["policy"].clone()
    with torch.inference_mode():
        env.step(torch.ones(4, 1))
    assert torch.equal(first["policy"], kept)  # rsl_rl stores this step's observation after the next step
