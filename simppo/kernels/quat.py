"""Quaternion helpers for Warp kernels. simppo stores quaternions as ``wxyz`` in ``wp.vec4``.

Warp's own ``wp.quat`` is ``xyzw``; these functions never use it, so a quaternion read from a
MuJoCo/MJWarp buffer (``wxyz``) or a MotionLib tensor can be passed straight in.
"""

import warp as wp


@wp.func
def quat_mul(a: wp.vec4, b: wp.vec4) -> wp.vec4:
    """Hamilton product a*b, both wxyz."""
    return wp.vec4(
        a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3],
        a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2],
        a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1],
        a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0],
    )


@wp.func
def quat_conj(q: wp.vec4) -> wp.vec4:
    return wp.vec4(q[0], -q[1], -q[2], -q[3])


@wp.func
def quat_normalize(q: wp.vec4) -> wp.vec4:
    n = wp.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    if n < 1.0e-12:
        return wp.vec4(1.0, 0.0, 0.0, 0.0)
    return q / n


@wp.func
def quat_rotate(q: wp.vec4, v: wp.vec3) -> wp.vec3:
    """Rotate v by unit quaternion q (wxyz)."""
    u = wp.vec3(q[1], q[2], q[3])
    t = 2.0 * wp.cross(u, v)
    return v + q[0] * t + wp.cross(u, t)


@wp.func
def quat_rotate_inv(q: wp.vec4, v: wp.vec3) -> wp.vec3:
    """Rotate v by the inverse of unit quaternion q (wxyz)."""
    return quat_rotate(quat_conj(q), v)


@wp.func
def quat_slerp(a: wp.vec4, b: wp.vec4, t: float) -> wp.vec4:
    """Spherical interpolation on the short arc; lerp fallback for nearly equal quaternions."""
    d = a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3]
    bb = b
    if d < 0.0:
        d = -d
        bb = -b
    if d > 0.9995:
        return quat_normalize(a * (1.0 - t) + bb * t)
    theta = wp.acos(d)
    s = wp.sin(theta)
    wa = wp.sin((1.0 - t) * theta) / s
    wb = wp.sin(t * theta) / s
    return a * wa + bb * wb


@wp.func
def quat_yaw(q: wp.vec4) -> float:
    """Heading angle (rotation about world z) of q."""
    return wp.atan2(2.0 * (q[0] * q[3] + q[1] * q[2]), 1.0 - 2.0 * (q[2] * q[2] + q[3] * q[3]))


@wp.func
def quat_from_yaw(yaw: float) -> wp.vec4:
    return wp.vec4(wp.cos(0.5 * yaw), 0.0, 0.0, wp.sin(0.5 * yaw))


@wp.func
def quat_to_axis_angle(q: wp.vec4) -> wp.vec3:
    """Rotation vector (axis * angle, angle in [0, pi]) of unit quaternion q."""
    qq = q
    if qq[0] < 0.0:
        qq = -q
    v = wp.vec3(qq[1], qq[2], qq[3])
    s = wp.length(v)
    if s < 1.0e-8:
        return 2.0 * v
    angle = 2.0 * wp.atan2(s, qq[0])
    return v * (angle / s)


@wp.func
def quat_angle(q: wp.vec4) -> float:
    """Rotation angle of q in [0, pi]."""
    s = wp.sqrt(q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    return 2.0 * wp.atan2(s, wp.abs(q[0]))


@wp.func
def quat_to_mat(q: wp.vec4) -> wp.mat33:
    w = q[0]
    x = q[1]
    y = q[2]
    z = q[3]
    return wp.mat33(
        1.0 - 2.0 * (y * y + z * z), 2.0 * (x * y - w * z), 2.0 * (x * z + w * y),
        2.0 * (x * y + w * z), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z - w * x),
        2.0 * (x * z - w * y), 2.0 * (y * z + w * x), 1.0 - 2.0 * (x * x + y * y),
    )


@wp.func
def heading_quat(q: wp.vec4) -> wp.vec4:
    """Yaw-only part of q (rotation about world z)."""
    return quat_from_yaw(quat_yaw(q))


@wp.func
def quat_error_angle(a: wp.vec4, b: wp.vec4) -> float:
    """Angle in [0, pi] of the rotation taking a to b (``|a^-1 b|``)."""
    return quat_angle(quat_mul(quat_conj(a), b))
