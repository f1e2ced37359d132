"""Warp kernels of the built-in torque-limited pendulum swing-up env (theta = 0 is upright)."""

import warp as wp


@wp.struct
class PendulumParams:
    """Dynamics constants; ``seed`` and ``step_count`` select this call's random stream."""

    max_torque: float
    max_speed: float
    dt: float
    gravity: float
    mass: float
    length: float
    max_episode_steps: int
    seed: int
    step_count: int


@wp.struct
class PendulumBuffers:
    """Per-env buffers ``[N]`` (``obs`` / ``terminal_obs [N, 3]``, ``actions [N, 1]`` the policy's input)."""

    actions: wp.array2d(dtype=wp.float32)
    theta: wp.array(dtype=wp.float32)
    theta_dot: wp.array(dtype=wp.float32)
    episode_length: wp.array(dtype=wp.int32)
    episode_return: wp.array(dtype=wp.float32)
    reward: wp.array(dtype=wp.float32)
    terminated: wp.array(dtype=wp.bool)
    truncated: wp.array(dtype=wp.bool)
    terminal_obs: wp.array2d(dtype=wp.float32)
    obs: wp.array2d(dtype=wp.float32)
    done_return: wp.array(dtype=wp.float32)
    done_length: wp.array(dtype=wp.float32)


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
def _step(p: PendulumParams, b: PendulumBuffers):
    """One control step per env, with auto-reset. State arrays are read-modify-write.

    ``b.actions [N, 1]`` in [-1, 1] (scaled by ``max_torque``); obs ``[N, 3]`` = (cos, sin, theta_dot / 8).

    # Data in: b.actions, p (dynamics, limits, seed, step_count)
    # Data out: b.theta, b.theta_dot, b.episode_length, b.episode_return (read-modify-write), b.obs, b.reward,
    #   b.terminated, b.truncated, b.terminal_obs, b.done_return, b.done_length
    """
    env = wp.tid()
    th = b.theta[env]
    thdot = b.theta_dot[env]
    u = wp.clamp(b.actions[env, 0], -1.0, 1.0) * p.max_torque
    norm_th = angle_normalize(th)
    reward = -(norm_th * norm_th + 0.1 * thdot * thdot + 0.001 * u * u)

    accel = 3.0 * p.gravity / (2.0 * p.length) * wp.sin(th) + 3.0 / (p.mass * p.length * p.length) * u
    thdot = thdot + accel * p.dt
    thdot = wp.clamp(thdot, -p.max_speed, p.max_speed)
    th = th + thdot * p.dt

    ep_len = b.episode_length[env] + 1
    ep_ret = b.episode_return[env] + reward
    truncated = ep_len >= p.max_episode_steps
    b.reward[env] = reward
    b.terminated[env] = False
    b.truncated[env] = truncated
    write_obs(env, th, thdot, b.terminal_obs)
    b.done_return[env] = ep_ret
    b.done_length[env] = float(ep_len)
    if truncated:
        state = wp.rand_init(p.seed, env + p.step_count * b.obs.shape[0])
        th = wp.randf(state, -wp.pi, wp.pi)
        thdot = wp.randf(state, -1.0, 1.0)
        ep_len = 0
        ep_ret = 0.0
    b.theta[env] = th
    b.theta_dot[env] = thdot
    b.episode_length[env] = ep_len
    b.episode_return[env] = ep_ret
    write_obs(env, th, thdot, b.obs)


@wp.kernel
def _reset(p: PendulumParams, b: PendulumBuffers):
    """Random initial state for every env: theta ~ U(-pi, pi), theta_dot ~ U(-1, 1).

    # Data in: p.seed, p.step_count
    # Data out: b.theta, b.theta_dot, b.episode_length, b.episode_return, b.obs
    """
    env = wp.tid()
    state = wp.rand_init(p.seed, env + p.step_count * b.obs.shape[0])
    th = wp.randf(state, -wp.pi, wp.pi)
    thdot = wp.randf(state, -1.0, 1.0)
    b.theta[env] = th
    b.theta_dot[env] = thdot
    b.episode_length[env] = 0
    b.episode_return[env] = 0.0
    write_obs(env, th, thdot, b.obs)


@wp.kernel
def _observe(b: PendulumBuffers):
    """# Data in: b.theta, b.theta_dot. # Data out: b.obs."""
    env = wp.tid()
    write_obs(env, b.theta[env], b.theta_dot[env], b.obs)


def step(p: PendulumParams, b: PendulumBuffers) -> None:
    """Advance every env one control step (auto-reset at truncation)."""
    wp.launch(_step, dim=b.theta.shape[0], inputs=[p, b], device=b.theta.device)


def reset(p: PendulumParams, b: PendulumBuffers) -> None:
    """Random initial state of every env."""
    wp.launch(_reset, dim=b.theta.shape[0], inputs=[p, b], device=b.theta.device)


def observe(b: PendulumBuffers) -> None:
    """``b.obs`` from the current state."""
    wp.launch(_observe, dim=b.theta.shape[0], inputs=[b], device=b.theta.device)
