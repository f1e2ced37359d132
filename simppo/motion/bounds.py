"""What a packed motion may hold: frame rates, speeds and poses a real clip stays inside.

``simppo-pack`` refuses clips outside these bounds, and :class:`~simppo.motion.motion_lib.MotionLib`
checks every loaded field against them again (a shard written by another tool, or damaged behind a valid
checksum, must not reach training). The bounds are physical, far above any human or robot motion: real
retargeted G1 clips (a LAFAN1 walk, IK jumps) peak near 4 m/s, 13 rad/s body and 21 rad/s joint speed.
"""

from __future__ import annotations

import numpy as np

MIN_FPS = 1.0  # frames per second of an input clip, of --target-fps and of a shard's motions
MAX_FPS = 1000.0
MAX_LINEAR_SPEED = 50.0  # m/s, any body
MAX_ANGULAR_SPEED = 200.0  # rad/s, any body
MAX_JOINT_SPEED = 200.0  # rad/s, any joint
MAX_POSITION = 1.0e4  # m, any body coordinate
QUAT_NORM_TOL = 1.0e-3  # |norm - 1| of a stored (normalised, float32) quaternion
JOINT_LIMIT_TOL = 0.05  # rad beyond a joint's range that a loaded clip may reach

#: Per-field bound: (kind, limit). ``norm``: Euclidean norm of the last axis; ``abs``: every value.
FIELD_BOUNDS: dict[str, tuple[str, float, str]] = {
    "root_pos": ("abs", MAX_POSITION, "m"),
    "body_pos_w": ("abs", MAX_POSITION, "m"),
    "root_lin_vel_w": ("norm", MAX_LINEAR_SPEED, "m/s"),
    "body_lin_vel_w": ("norm", MAX_LINEAR_SPEED, "m/s"),
    "root_ang_vel_w": ("norm", MAX_ANGULAR_SPEED, "rad/s"),
    "body_ang_vel_w": ("norm", MAX_ANGULAR_SPEED, "rad/s"),
    "dof_vel": ("abs", MAX_JOINT_SPEED, "rad/s"),
}
QUAT_FIELDS = ("root_quat", "body_quat_w")


def fps_problem(fps: float) -> str | None:
    """Why ``fps`` is not a usable frame rate (``None`` when it is)."""
    if not (np.isfinite(fps) and MIN_FPS <= fps <= MAX_FPS):
        return f"frame rate {fps:g} is outside [{MIN_FPS:g}, {MAX_FPS:g}] fps"
    return None


def field_problem(name: str, values: np.ndarray, joint_limits: tuple[np.ndarray, np.ndarray] | None = None
                  ) -> tuple[int, str] | None:
    """The first frame of ``values [T, ...]`` (field ``name``) that breaks its bound, with what is wrong, or
    ``None``. ``joint_limits``: ``(lower [D], upper [D])`` for ``dof_pos`` (skipped without)."""
    v = np.asarray(values, dtype=np.float64)
    if v.dtype.kind != "f" or v.size == 0:
        return None
    flat = v.reshape(len(v), -1)
    bad = ~np.isfinite(flat).all(axis=1)
    if bad.any():
        return int(np.argmax(bad)), "a non-finite value"
    if name in QUAT_FIELDS:
        norms = np.linalg.norm(v, axis=-1).reshape(len(v), -1)
        err = np.abs(norms - 1.0)
        if (err > QUAT_NORM_TOL).any():
            t = int(np.argmax((err > QUAT_NORM_TOL).any(axis=1)))
            return t, f"a quaternion of norm {norms[t, int(np.argmax(err[t]))]:.4g}, not a unit quaternion"
    if name == "dof_pos" and joint_limits is not None:
        lo, hi = (np.asarray(x, dtype=np.float64) for x in joint_limits)
        over = np.maximum(lo - v, v - hi).max(axis=1)
        if (over > JOINT_LIMIT_TOL).any():
            t = int(np.argmax(over > JOINT_LIMIT_TOL))
            j = int(np.argmax(np.maximum(lo - v[t], v[t] - hi)))
            return t, (f"joint {j} = {v[t, j]:.4g} rad, outside its range [{lo[j]:.4g}, {hi[j]:.4g}] by more than "
                       f"{JOINT_LIMIT_TOL} rad")
    if name in FIELD_BOUNDS:
        kind, limit, unit = FIELD_BOUNDS[name]
        mag = np.linalg.norm(v, axis=-1) if kind == "norm" else np.abs(v)
        peak = mag.reshape(len(v), -1).max(axis=1)
        if (peak > limit).any():
            t = int(np.argmax(peak > limit))
            return t, f"{peak[t]:.4g} {unit}, beyond the physical bound of {limit:g} {unit}"
    return None
