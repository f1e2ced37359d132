"""``WrappedGymEnv``: a gymnasium env as a simppo ``VecEnv`` (gymnasium → simppo), checked step by step against the
gymnasium env it wraps."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from simppo.integrations.gymnasium import WrappedGymEnv


def test_steps_match_the_gymnasium_env_and_ended_episodes_report_their_last_observation():
    env = WrappedGymEnv("Pendulum-v1", num_envs=3, seed=5)
    ref = gym.make_vec("Pendulum-v1", num_envs=3, vectorization_mode="sync",
                       vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})
    obs = env.reset()["obs"]
    ref_obs, _ = ref.reset(seed=5)
    assert obs.shape == (3, 3) and obs.dtype == torch.float32
    np.testing.assert_allclose(obs.numpy(), ref_obs, rtol=1e-6)
    rng = np.random.default_rng(0)
    total = np.zeros(3)
    for _ in range(200):  # Pendulum-v1 truncates at 200 steps
        a = rng.choice([-1.0, -0.5, 0.0, 0.5, 1.0], size=(3, 1)).astype(np.float32)  # scaled exactly
        o, r, term, trunc, extras = env.step(torch.as_tensor(a))
        ro, rr, rterm, rtrunc, rinfo = ref.step(2.0 * a)  # [-1, 1] is scaled to the Box's [-2, 2]
        total += rr
        np.testing.assert_allclose(r.numpy(), rr, rtol=1e-5)
        assert np.array_equal(term.numpy(), rterm) and np.array_equal(trunc.numpy(), rtrunc)
    assert bool(trunc.all())
    np.testing.assert_allclose(extras["terminal_obs"]["obs"].numpy(), np.stack(rinfo["final_obs"]), rtol=1e-6)
    np.testing.assert_allclose(o["obs"].numpy(), ro, rtol=1e-6)  # the next episode's first observation
    np.testing.assert_allclose(extras["episode"]["reward"].numpy(), total, rtol=1e-4)
    assert torch.equal(extras["episode"]["length"], torch.full((3,), 200.0))


def test_envs_it_cannot_drive_are_refused_in_one_line():
    next_step = gym.make_vec("Pendulum-v1", num_envs=2, vectorization_mode="sync")
    with pytest.raises(ValueError, match="needs SAME_STEP"):
        WrappedGymEnv(next_step)
    with pytest.raises(ValueError, match="continuous \\(Box\\) spaces"):
        WrappedGymEnv("CartPole-v1", num_envs=2)
    single = WrappedGymEnv(gym.make("Pendulum-v1"), seed=1)  # one gymnasium Env is one env
    assert single.num_envs == 1 and single.reset()["obs"].shape == (1, 3)
