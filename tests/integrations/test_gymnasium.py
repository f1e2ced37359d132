"""``GymVectorEnv``: gymnasium's vector-env contract on simppo's envs (the checks of gymnasium's env checker that
apply to a vector env), with torch tensors on the env's device."""

import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

import simppo
from simppo.integrations.gymnasium import GymVectorEnv

N = 6


def make(steps: int = 5, seed: int = 0) -> GymVectorEnv:
    return GymVectorEnv(simppo.make_env("pendulum", N, "cpu", seed=seed, **{"env.max_episode_steps": steps}))


def in_space(space, x: torch.Tensor) -> bool:
    return space.contains(x.numpy()) if isinstance(x, torch.Tensor) else False


def test_spaces_reset_and_step_follow_the_vector_api():
    env = make()
    assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    assert env.single_observation_space.shape == (3,) and env.single_action_space.shape == (1,)
    assert env.observation_space.shape == (N, 3) and env.action_space.shape == (N, 1)
    obs, infos = env.reset(seed=0)
    assert isinstance(obs, torch.Tensor) and obs.dtype == torch.float32 and obs.device.type == "cpu"
    assert in_space(env.observation_space, obs) and infos["critic_obs"].shape == (N, 3)
    actions = torch.as_tensor(env.action_space.sample())
    obs, rew, term, trunc, infos = env.step(actions)
    assert in_space(env.observation_space, obs)
    assert rew.shape == (N,) and rew.dtype == torch.float32
    assert term.dtype == trunc.dtype == torch.bool and term.shape == trunc.shape == (N,)
    obs2, *_ = env.step(np.zeros((N, 1), np.float32))  # arrays are accepted too
    assert not torch.equal(obs, obs2)
    with pytest.raises(ValueError, match="built with seed 0"):
        env.reset(seed=1)


def test_same_step_autoreset_reports_the_last_observation_of_ended_episodes():
    env = make(steps=5)
    env.reset()
    for _ in range(5):
        obs, _, term, trunc, infos = env.step(torch.full((N, 1), 0.5))
        done = term | trunc
        assert torch.equal(infos["_final_obs"], done)
    assert bool(trunc.all()) and not bool(term.any())  # the time limit ended every episode at step 5
    final = infos["final_obs"]
    assert torch.allclose(final[:, 0] ** 2 + final[:, 1] ** 2, torch.ones(N), atol=1e-5)  # a real observation
    assert not torch.allclose(final, obs)  # obs is already the next episode's first
    assert torch.equal(infos["_episode"], done) and torch.equal(infos["episode"]["length"], torch.full((N,), 5,
                                                                                          dtype=infos["episode"]["length"].dtype))


def test_same_seed_same_trajectory_and_returned_tensors_are_copies():
    a, b = make(seed=4), make(seed=4)
    oa, _ = a.reset()
    ob, _ = b.reset()
    oa_kept = oa.clone()
    oa.add_(100.0)  # a user's in-place change must not reach the env
    for _ in range(7):
        xa, ra, *_ = a.step(torch.full((N, 1), -0.2))
        xb, rb, *_ = b.step(torch.full((N, 1), -0.2))
        assert torch.equal(xa, xb) and torch.equal(ra, rb)
    assert torch.equal(oa_kept, ob)
