"""Left-right mirror image of a clip (``simppo-pack --mirror``), from the robot config's mirror map.

The mirror plane is the root's sagittal plane at the clip's first frame: vertical, through the root's position,
along its heading. Reflecting the world in it (``M_w``) and the robot in its own sagittal plane (``M = diag(1, -1,
1)`` in the root frame) keeps the clip's start position and heading: root position ``p0 + M_w (p - p0)``, root
orientation ``M_w R M``, each joint's angle moved to its partner with the sign of the map (roll and yaw joints
change sign, pitch joints keep it). Mirroring twice gives the clip back.
"""

from __future__ import annotations

import numpy as np

from simppo.motion.kinematics import quat_mul


def _yaw_quat(yaw: float) -> np.ndarray:
    return np.array([np.cos(yaw / 2.0), 0.0, 0.0, np.sin(yaw / 2.0)])


def heading(q: np.ndarray) -> float:
    """Yaw (rad) of the x axis of the wxyz quaternion ``q [4]`` projected onto the ground."""
    w, x, y, z = q
    return float(np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z)))


def mirror_qpos(qpos: np.ndarray, partner: np.ndarray, sign: np.ndarray) -> np.ndarray:
    """The mirror image of ``qpos [T, 7 + D]`` (root position, root quaternion wxyz, joints in qpos order);
    ``partner [D]`` / ``sign [D]`` in qpos order: joint ``j`` of the clip becomes ``sign[j]`` times joint
    ``partner[j]`` of the mirror image."""
    qpos = np.asarray(qpos, dtype=np.float64)
    p0, yaw0 = qpos[0, :3].copy(), heading(qpos[0, 3:7])
    n = np.array([-np.sin(yaw0), np.cos(yaw0), 0.0])  # the mirror plane's normal
    out = np.empty_like(qpos)
    d = qpos[:, :3] - p0
    out[:, :3] = p0 + d - 2.0 * (d @ n)[:, None] * n
    # M_w R M = Rz(yaw0) (M (Rz(-yaw0) R) M), and M R1 M of a quaternion (w, x, y, z) is (w, -x, y, -z)
    local = quat_mul(np.broadcast_to(_yaw_quat(-yaw0), qpos[:, 3:7].shape), qpos[:, 3:7])
    local = local * np.array([1.0, -1.0, 1.0, -1.0])
    out[:, 3:7] = quat_mul(np.broadcast_to(_yaw_quat(yaw0), local.shape), local)
    out[:, 7 + np.asarray(partner)] = qpos[:, 7:] * np.asarray(sign)
    return out
