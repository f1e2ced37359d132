"""Shared Warp functions of the humanoid-imitation kernels (wxyz quaternions on ``wp.vec4``)."""

import warp as wp

from simppo.kernels.quat import heading_quat, quat_conj, quat_mul, quat_rotate, quat_to_mat

GRAVITY_DIR_W = wp.constant(wp.vec3(0.0, 0.0, -1.0))


@wp.func
def sigma_row(sigmas: wp.array2d(dtype=wp.float32), motion_ids: wp.array(dtype=wp.int32), env: int) -> int:
    """The row of ``sigmas [S, T]`` that env ``env`` reads: 0 with one row for all, its motion with one per motion."""
    if sigmas.shape[0] > 1:
        return motion_ids[env]
    return 0


@wp.func
def write_vec3(out: wp.array2d(dtype=wp.float32), env: int, col: int, v: wp.vec3) -> int:
    out[env, col + 0] = v[0]
    out[env, col + 1] = v[1]
    out[env, col + 2] = v[2]
    return col + 3


@wp.func
def write_rot6d(out: wp.array2d(dtype=wp.float32), env: int, col: int, q: wp.vec4) -> int:
    """First two columns of the rotation matrix, row-major: [m00, m01, m10, m11, m20, m21]."""
    m = quat_to_mat(q)
    out[env, col + 0] = m[0, 0]
    out[env, col + 1] = m[0, 1]
    out[env, col + 2] = m[1, 0]
    out[env, col + 3] = m[1, 1]
    out[env, col + 4] = m[2, 0]
    out[env, col + 5] = m[2, 1]
    return col + 6


@wp.func
def yaw_delta(robot_anchor_quat: wp.vec4, ref_anchor_quat: wp.vec4) -> wp.vec4:
    """Heading rotation that maps the reference's heading onto the robot's (BeyondMimic convention)."""
    return heading_quat(quat_mul(robot_anchor_quat, quat_conj(ref_anchor_quat)))


@wp.func
def relative_body_pos(
    robot_anchor_pos: wp.vec3, ref_anchor_pos: wp.vec3, delta: wp.vec4, ref_body_pos: wp.vec3
) -> wp.vec3:
    """Reference body position moved to the robot's anchor (x, y) and heading, reference height kept."""
    base = wp.vec3(robot_anchor_pos[0], robot_anchor_pos[1], ref_anchor_pos[2])
    return base + quat_rotate(delta, ref_body_pos - ref_anchor_pos)
