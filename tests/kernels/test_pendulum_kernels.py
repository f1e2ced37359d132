"""The pendulum env's kernels (step with auto-reset, reset, observe) against a float64 NumPy reference of Gym's
Pendulum-v1 dynamics and reward."""

import numpy as np
import pytest
import torch

from simppo.envs.pendulum.env import PendulumEnv, PendulumEnvCfg

N = 64


def reference_step(cfg: PendulumEnvCfg, theta, theta_dot, action):
    """Gym's Pendulum-v1 in float64: reward of the state before the step, then semi-implicit Euler.
    ``theta, theta_dot, action [N]``; returns ``(theta, theta_dot, reward) [N]``."""
    u = np.clip(action, -1.0, 1.0) * cfg.max_torque
    norm = np.mod(theta + np.pi, 2 * np.pi) - np.pi
    reward = -(norm ** 2 + 0.1 * theta_dot ** 2 + 0.001 * u ** 2)
    accel = 3 * cfg.gravity / (2 * cfg.length) * np.sin(theta) + 3.0 / (cfg.mass * cfg.length ** 2) * u
    new_dot = np.clip(theta_dot + accel * cfg.dt, -cfg.max_speed, cfg.max_speed)
    return theta + new_dot * cfg.dt, new_dot, reward


def reference_obs(theta, theta_dot):
    """``[N, 3]`` = (cos θ, sin θ, θ̇ / 8)."""
    return np.stack([np.cos(theta), np.sin(theta), theta_dot / 8.0], axis=1)


def random_state(env: PendulumEnv, seed: int, length_hi: int):
    g = torch.Generator().manual_seed(seed)
    env.theta.copy_(torch.rand(N, generator=g) * 8 - 4)  # past ±π, so the angle is wrapped for the reward
    env.theta_dot.copy_(torch.rand(N, generator=g) * 16 - 8)
    env.episode_length.copy_(torch.randint(0, length_hi, (N,), generator=g, dtype=torch.int32))
    env.episode_return.copy_(torch.randn(N, generator=g) * 10)
    return (torch.rand(N, 1, generator=g) * 3 - 1.5)  # past ±1, so the action is clipped


def as64(t: torch.Tensor) -> np.ndarray:
    return t.double().numpy()


def test_step_follows_gym_pendulum_until_truncation():
    cfg = PendulumEnvCfg(max_episode_steps=1000)
    env = PendulumEnv(cfg, N, seed=3)
    actions = random_state(env, seed=0, length_hi=900)
    th0, thd0 = as64(env.theta), as64(env.theta_dot)
    len0, ret0 = env.episode_length.clone(), as64(env.episode_return)

    obs, reward, terminated, truncated, extras = env.step(actions)

    th, thd, rew = reference_step(cfg, th0, thd0, as64(actions[:, 0]))
    np.testing.assert_allclose(as64(env.theta), th, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(as64(env.theta_dot), thd, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(as64(reward), rew, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(as64(obs["obs"]), reference_obs(th, thd), atol=1e-5)
    np.testing.assert_allclose(as64(extras["terminal_obs"]["obs"]), reference_obs(th, thd), atol=1e-5)
    assert torch.equal(env.episode_length, len0 + 1)
    np.testing.assert_allclose(as64(env.episode_return), ret0 + rew, rtol=1e-5, atol=1e-4)
    assert not terminated.any() and not truncated.any()


def test_truncated_envs_report_their_last_state_and_restart_at_random():
    cfg = PendulumEnvCfg(max_episode_steps=100)
    env = PendulumEnv(cfg, N, seed=3)
    actions = random_state(env, seed=1, length_hi=100)
    env.episode_length[: N // 2] = cfg.max_episode_steps - 1  # these end on this step
    env.episode_length[N // 2:] = torch.clamp(env.episode_length[N // 2:], max=cfg.max_episode_steps - 2)
    th0, thd0, ret0 = as64(env.theta), as64(env.theta_dot), as64(env.episode_return)
    len0 = env.episode_length.clone()

    obs, reward, terminated, truncated, extras = env.step(actions)

    th, thd, rew = reference_step(cfg, th0, thd0, as64(actions[:, 0]))
    done = np.arange(N) < N // 2
    assert torch.equal(truncated, torch.from_numpy(done)) and not terminated.any()
    # the episode's last transition: its observation, return and length, as the agent bootstraps from them
    np.testing.assert_allclose(as64(extras["terminal_obs"]["obs"]), reference_obs(th, thd), atol=1e-5)
    np.testing.assert_allclose(as64(extras["episode"]["reward"]), ret0 + rew, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(as64(extras["episode"]["length"]), as64(len0 + 1))
    # the restarted envs: a fresh episode from θ ~ U(-π, π), θ̇ ~ U(-1, 1), observed as such
    th_new, thd_new = as64(env.theta)[done], as64(env.theta_dot)[done]
    assert (np.abs(th_new) <= np.pi).all() and (np.abs(thd_new) <= 1.0).all()
    assert len(np.unique(th_new)) == done.sum()  # each env its own draw
    assert (env.episode_length[: N // 2] == 0).all() and (env.episode_return[: N // 2] == 0).all()
    np.testing.assert_allclose(as64(obs["obs"])[done], reference_obs(th_new, thd_new), atol=1e-6)
    # the others carry on
    np.testing.assert_allclose(as64(env.theta)[~done], th[~done], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(as64(obs["obs"])[~done], reference_obs(th, thd)[~done], atol=1e-5)


@pytest.mark.parametrize("seed", [0, 5])
def test_reset_draws_each_env_in_range_and_the_same_for_the_same_seed(seed):
    a, b = PendulumEnv(PendulumEnvCfg(), N, seed=seed), PendulumEnv(PendulumEnvCfg(), N, seed=seed)
    obs_a = a.reset()
    b.reset()
    assert torch.equal(a.theta, b.theta) and torch.equal(a.theta_dot, b.theta_dot)
    th, thd = as64(a.theta), as64(a.theta_dot)
    assert (np.abs(th) <= np.pi).all() and (np.abs(thd) <= 1.0).all()
    assert th.std() > 1.0 and len(np.unique(th)) == N  # spread over the circle, one draw per env
    assert (a.episode_length == 0).all() and (a.episode_return == 0).all()
    np.testing.assert_allclose(as64(obs_a["obs"]), reference_obs(th, thd), atol=1e-6)
    c = PendulumEnv(PendulumEnvCfg(), N, seed=seed + 1)
    c.reset()
    assert not torch.equal(a.theta, c.theta)
    a.reset()  # a later call draws a new state
    assert not torch.equal(a.theta, b.theta)


def test_observe_reads_the_state():
    env = PendulumEnv(PendulumEnvCfg(), N, seed=0)
    random_state(env, seed=2, length_hi=10)
    obs = env.get_observations()
    np.testing.assert_allclose(as64(obs["obs"]), reference_obs(as64(env.theta), as64(env.theta_dot)), atol=1e-6)
