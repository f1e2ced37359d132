"""Reference-state initialisation: simulator targets for the envs being reset, and their perturbation."""

import warp as wp

from simppo.kernels.imitation.buffers import ImitationBuffers, ImitationParams, RefState
from simppo.kernels.quat import quat_mul, quat_normalize, quat_rotate, quat_rotate_inv

RESET_NOISE_ROOT_DRAWS = wp.constant(12)  # root position, roll / pitch / yaw, linear and angular velocity (3 each)


@wp.kernel
def _reference_state(ref: RefState, p: ImitationParams, mask: wp.array(dtype=wp.bool), buf: ImitationBuffers):
    """For envs where ``mask [N]``: free-joint qpos (pos, wxyz quat) and qvel (world linear velocity,
    body-frame angular velocity, as MuJoCo's free joint wants) plus joint pos/vel from reference slot 0
    into ``buf.qpos_target`` / ``buf.qvel_target``; their last actions (and action history) are zeroed.
    Other rows untouched.

    # Data in: ref (slot 0: root pose and velocities, joint positions and velocities), mask
    # Data out: buf.qpos_target, buf.qvel_target, buf.actions, buf.prev_actions, buf.action_history (masked rows)
    """
    env = wp.tid()
    if not mask[env]:
        return
    pos = ref.root_pos[env, 0]
    q = quat_normalize(ref.root_quat[env, 0])
    w_b = quat_rotate_inv(q, ref.root_ang_vel_w[env, 0])
    v = ref.root_lin_vel_w[env, 0]
    for i in range(3):
        buf.qpos_target[env, i] = pos[i]
        buf.qvel_target[env, i] = v[i]
        buf.qvel_target[env, 3 + i] = w_b[i]
    for i in range(4):
        buf.qpos_target[env, 3 + i] = q[i]
    for j in range(ref.dof_pos.shape[2]):
        buf.qpos_target[env, p.joint_qpos_start + j] = ref.dof_pos[env, 0, j]
        buf.qvel_target[env, p.joint_dof_start + j] = ref.dof_vel[env, 0, j]
    for j in range(buf.actions.shape[1]):
        buf.actions[env, j] = 0.0
        buf.prev_actions[env, j] = 0.0
        for k in range(buf.action_history.shape[1]):
            buf.action_history[env, k, j] = 0.0


def reference_state(ref: RefState, p: ImitationParams, mask: wp.array, buf: ImitationBuffers) -> None:
    """Reset targets (and zeroed last actions) of the envs in ``mask [N]`` (bool)."""
    wp.launch(_reference_state, dim=mask.shape[0], inputs=[ref, p, mask, buf], device=mask.device)


@wp.struct
class ResetNoise:
    """Half-widths of the uniform perturbation of a reset state (BeyondMimic's ``pose_range``,
    ``velocity_range``, ``joint_position_range``): root position (m, world x y z), root rotation (rad, roll pitch
    yaw about the world axes), root linear and angular velocity (m/s, rad/s, world), joint angles (rad, kept
    inside ``[soft_joint_lo, soft_joint_hi] [A]`` unless the reference is already outside); ``scale [1]``: the
    factor on every half-width, which grows by ``scale_step`` per control step to 1 (:func:`advance_reset_noise`);
    ``at_clip_start`` 0: a reset that starts its motion at t = 0 stays on the reference (as a play from t = 0
    starts)."""

    root_pos: wp.vec3
    root_rpy: wp.vec3
    root_lin_vel: wp.vec3
    root_ang_vel: wp.vec3
    joint_pos: float
    scale: wp.array(dtype=wp.float32)
    scale_step: float
    soft_joint_lo: wp.array(dtype=wp.float32)
    soft_joint_hi: wp.array(dtype=wp.float32)
    joint_qpos_start: int
    at_clip_start: int


@wp.func
def _axis_quat(axis: int, angle: float) -> wp.vec4:
    q = wp.vec4(wp.cos(0.5 * angle), 0.0, 0.0, 0.0)
    q[1 + axis] = wp.sin(0.5 * angle)
    return q


@wp.kernel
def _perturb_reset_state(noise: ResetNoise, mask: wp.array(dtype=wp.bool), times: wp.array(dtype=wp.float32),
                         rng_out: wp.array(dtype=wp.uint32), qpos_out: wp.array2d(dtype=wp.float32),
                         qvel_out: wp.array2d(dtype=wp.float32), draws_out: wp.array2d(dtype=wp.float32)):
    """For envs where ``mask [N]`` (and, unless ``noise.at_clip_start``, whose start time ``times [N]`` is not 0:
    those keep the reference's state and zero draws): draw ``draws_out [N, 12 + A]`` uniform in [-1, 1] from the
    env's ``rng_out``
    and move the reset targets by draw x half-width x ``noise.scale``: the root position and world-frame velocities
    add theirs, the root rotation turns by R_z(yaw) R_y(pitch) R_x(roll) in the world frame (the world angular
    velocity kept, re-expressed in the new root frame, as MuJoCo's free joint wants), each joint angle adds its own.
    Other rows untouched.

    # Data in: noise, mask, times, rng_out (each env's random state), qpos_out / qvel_out (the reference's reset state)
    # Data out: qpos_out, qvel_out, draws_out (masked rows), rng_out (advanced where perturbed)
    """
    env = wp.tid()
    if not mask[env]:
        return
    if noise.at_clip_start == 0 and times[env] == 0.0:
        for k in range(draws_out.shape[1]):
            draws_out[env, k] = 0.0
        return
    state = rng_out[env]
    for k in range(draws_out.shape[1]):
        draws_out[env, k] = wp.randf(state, -1.0, 1.0)
    rng_out[env] = state
    s = noise.scale[0]
    q = quat_normalize(wp.vec4(qpos_out[env, 3], qpos_out[env, 4], qpos_out[env, 5], qpos_out[env, 6]))
    w_w = quat_rotate(q, wp.vec3(qvel_out[env, 3], qvel_out[env, 4], qvel_out[env, 5]))
    turn = quat_mul(_axis_quat(2, draws_out[env, 5] * s * noise.root_rpy[2]),
                    quat_mul(_axis_quat(1, draws_out[env, 4] * s * noise.root_rpy[1]),
                             _axis_quat(0, draws_out[env, 3] * s * noise.root_rpy[0])))
    q_new = quat_normalize(quat_mul(turn, q))
    for i in range(3):
        qpos_out[env, i] = qpos_out[env, i] + draws_out[env, i] * s * noise.root_pos[i]
        qvel_out[env, i] = qvel_out[env, i] + draws_out[env, 6 + i] * s * noise.root_lin_vel[i]
        w_w[i] = w_w[i] + draws_out[env, 9 + i] * s * noise.root_ang_vel[i]
    w_b = quat_rotate_inv(q_new, w_w)
    for i in range(3):
        qvel_out[env, 3 + i] = w_b[i]
    for i in range(4):
        qpos_out[env, 3 + i] = q_new[i]
    for j in range(noise.soft_joint_lo.shape[0]):
        a = qpos_out[env, noise.joint_qpos_start + j]
        lo = wp.min(a, noise.soft_joint_lo[j])
        hi = wp.max(a, noise.soft_joint_hi[j])
        qpos_out[env, noise.joint_qpos_start + j] = wp.clamp(
            a + draws_out[env, RESET_NOISE_ROOT_DRAWS + j] * s * noise.joint_pos, lo, hi)


def perturb_reset_state(noise: ResetNoise, mask: wp.array, times: wp.array, rng: wp.array, qpos: wp.array,
                        qvel: wp.array, draws: wp.array) -> None:
    """Perturb the reset targets ``qpos [N, nq]`` / ``qvel [N, nv]`` of the envs in ``mask [N]`` (bool) in
    place, after :func:`reference_state` wrote them (each env's start time ``times [N]``: with
    ``noise.at_clip_start`` 0 the starts at t = 0 are left on the reference); ``rng [N]`` (uint32) advances,
    ``draws [N, 12 + A]`` holds the unit draws."""
    wp.launch(_perturb_reset_state, dim=mask.shape[0], inputs=[noise, mask, times], outputs=[rng, qpos, qvel, draws],
              device=mask.device)


@wp.kernel
def _advance_reset_noise(noise: ResetNoise):
    """Launch dim ``1``: one control step of the half-widths' ramp, ``scale += scale_step`` up to 1.

    # Data in: noise.scale_step
    # Data out: noise.scale (read-modify-write)
    """
    noise.scale[0] = wp.min(1.0, noise.scale[0] + noise.scale_step)


def advance_reset_noise(noise: ResetNoise) -> None:
    """One control step of the reset noise's ramp (``noise.scale [1]`` grows to 1)."""
    wp.launch(_advance_reset_noise, dim=1, inputs=[noise], device=noise.scale.device)
