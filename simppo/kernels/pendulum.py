"""Warp kernels of the built-in torque-limited pendulum swing-up env (theta = 0 is upright)."""

import torch
import warp as wp

from simppo.utils.device import warp_device
from simppo.utils.device import warp_view as _wp


@wp.func
def angle_normalize(x: float) -> float:
    """Wrap an angle to [-pi, pi) (floor-mod, as in Gym's Pendulum)."""
    y = wp.mod(x + wp.pi, 2.0 * wp.pi)
    if y < 0.0:
        y = y + 2.0 * wp.pi
    return y - wp.pi


@wp.func
def write_obs(env: int, theta: float, theta_dot: float, obs_out: wp.array2d(dtype=wp.float32)):
    obs_out[env, 0] = wp.cos(theta)
    obs_out[env, 1] = wp.sin(theta)
    obs_out[env, 2] = theta_dot / 8.0


@wp.kernel
def pendulum_step_kernel(
    actions: wp.array2d(dtype=wp.float32),
    seed: int,
    step_count: int,
    max_torque: float,
    max_speed: float,
    dt: float,
    gravity: float,
    mass: float,
    length: float,
    max_episode_steps: int,
    theta_out: wp.array(dtype=wp.float32),
    theta_dot_out: wp.array(dtype=wp.float32),
    episode_length_out: wp.array(dtype=wp.int32),
    episode_return_out: wp.array(dtype=wp.float32),
    reward_out: wp.array(dtype=wp.float32),
    terminated_out: wp.array(dtype=wp.bool),
    truncated_out: wp.array(dtype=wp.bool),
    terminal_obs_out: wp.array2d(dtype=wp.float32),
    obs_out: wp.array2d(dtype=wp.float32),
    done_return_out: wp.array(dtype=wp.float32),
    done_length_out: wp.array(dtype=wp.float32),
):
    """One control step per env, with auto-reset. State arrays (``theta_out`` …) are read-modify-write.

    actions ``[N, 1]`` in [-1, 1] (scaled by ``max_torque``); obs ``[N, 3]`` = (cos, sin, theta_dot / 8).
    """
    env = wp.tid()
    th = theta_out[env]
    thdot = theta_dot_out[env]
    u = wp.clamp(actions[env, 0], -1.0, 1.0) * max_torque
    norm_th = angle_normalize(th)
    reward = -(norm_th * norm_th + 0.1 * thdot * thdot + 0.001 * u * u)

    thdot = thdot + (3.0 * gravity / (2.0 * length) * wp.sin(th) + 3.0 / (mass * length * length) * u) * dt
    thdot = wp.clamp(thdot, -max_speed, max_speed)
    th = th + thdot * dt

    ep_len = episode_length_out[env] + 1
    ep_ret = episode_return_out[env] + reward
    truncated = ep_len >= max_episode_steps
    reward_out[env] = reward
    terminated_out[env] = False
    truncated_out[env] = truncated
    write_obs(env, th, thdot, terminal_obs_out)
    done_return_out[env] = ep_ret
    done_length_out[env] = float(ep_len)
    if truncated:
        state = wp.rand_init(seed, env + step_count * terminal_obs_out.shape[0])
        th = wp.randf(state, -wp.pi, wp.pi)
        thdot = wp.randf(state, -1.0, 1.0)
        ep_len = 0
        ep_ret = 0.0
    theta_out[env] = th
    theta_dot_out[env] = thdot
    episode_length_out[env] = ep_len
    episode_return_out[env] = ep_ret
    write_obs(env, th, thdot, obs_out)


@wp.kernel
def pendulum_reset_kernel(
    seed: int,
    step_count: int,
    theta_out: wp.array(dtype=wp.float32),
    theta_dot_out: wp.array(dtype=wp.float32),
    episode_length_out: wp.array(dtype=wp.int32),
    episode_return_out: wp.array(dtype=wp.float32),
    obs_out: wp.array2d(dtype=wp.float32),
):
    """Random initial state for every env: theta ~ U(-pi, pi), theta_dot ~ U(-1, 1)."""
    env = wp.tid()
    state = wp.rand_init(seed, env + step_count * obs_out.shape[0])
    th = wp.randf(state, -wp.pi, wp.pi)
    thdot = wp.randf(state, -1.0, 1.0)
    theta_out[env] = th
    theta_dot_out[env] = thdot
    episode_length_out[env] = 0
    episode_return_out[env] = 0.0
    write_obs(env, th, thdot, obs_out)


@wp.kernel
def pendulum_observe_kernel(
    theta: wp.array(dtype=wp.float32),
    theta_dot: wp.array(dtype=wp.float32),
    obs_out: wp.array2d(dtype=wp.float32),
):
    env = wp.tid()
    write_obs(env, theta[env], theta_dot[env], obs_out)


def launch_pendulum_step(
    actions: torch.Tensor,
    seed: int,
    step_count: int,
    max_torque: float,
    max_speed: float,
    dt: float,
    gravity: float,
    mass: float,
    length: float,
    max_episode_steps: int,
    theta_out: torch.Tensor,
    theta_dot_out: torch.Tensor,
    episode_length_out: torch.Tensor,
    episode_return_out: torch.Tensor,
    reward_out: torch.Tensor,
    terminated_out: torch.Tensor,
    truncated_out: torch.Tensor,
    terminal_obs_out: torch.Tensor,
    obs_out: torch.Tensor,
    done_return_out: torch.Tensor,
    done_length_out: torch.Tensor,
) -> None:
    wp.launch(
        pendulum_step_kernel,
        dim=theta_out.shape[0],
        inputs=[_wp(actions.detach()), seed, step_count, max_torque, max_speed, dt, gravity, mass, length,
                max_episode_steps],
        outputs=[_wp(theta_out), _wp(theta_dot_out), _wp(episode_length_out), _wp(episode_return_out),
                 _wp(reward_out), _wp(terminated_out, wp.bool), _wp(truncated_out, wp.bool),
                 _wp(terminal_obs_out), _wp(obs_out), _wp(done_return_out), _wp(done_length_out)],
        device=warp_device(theta_out.device),
    )


def launch_pendulum_reset(
    seed: int,
    step_count: int,
    theta_out: torch.Tensor,
    theta_dot_out: torch.Tensor,
    episode_length_out: torch.Tensor,
    episode_return_out: torch.Tensor,
    obs_out: torch.Tensor,
) -> None:
    wp.launch(
        pendulum_reset_kernel,
        dim=theta_out.shape[0],
        inputs=[seed, step_count],
        outputs=[_wp(theta_out), _wp(theta_dot_out), _wp(episode_length_out), _wp(episode_return_out),
                 _wp(obs_out)],
        device=warp_device(theta_out.device),
    )


def launch_pendulum_observe(theta: torch.Tensor, theta_dot: torch.Tensor, obs_out: torch.Tensor) -> None:
    wp.launch(
        pendulum_observe_kernel,
        dim=theta.shape[0],
        inputs=[_wp(theta), _wp(theta_dot)],
        outputs=[_wp(obs_out)],
        device=warp_device(theta.device),
    )
