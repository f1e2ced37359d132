"""Observation kernel of the humanoid-imitation env: one thread per env writes one row of ``buf.obs``.

The row follows :mod:`simppo.envs.imitation.spec` term by term (``obs_terms``): proprioception, body
poses, one block per future frame, then the privileged critic terms. Vectors are in the robot root's
heading (yaw) frame except the three ``_b`` entries (full root-body frame). Rotations are 6D: the first
two columns of the rotation matrix, row-major.
"""

import warp as wp

from simppo.kernels.imitation.buffers import ImitationBuffers, ImitationParams, RefState
from simppo.kernels.imitation.common import GRAVITY_DIR_W, write_rot6d, write_vec3
from simppo.kernels.quat import heading_quat, quat_conj, quat_mul, quat_rotate_inv
from simppo.sim.base import SimState


@wp.kernel
def _observations(sim: SimState, ref: RefState, p: ImitationParams, mask: wp.array(dtype=wp.bool),
                  buf: ImitationBuffers):
    """Robot state by MuJoCo body id; reference slot 0 = now, slots 1.. = future frames. Writes the
    rows of ``buf.obs [N, D]`` where ``mask [N]`` is set; the row of an unstable world (``sim.unstable``) is
    zero (its state may be non-finite)."""
    env = wp.tid()
    if not mask[env]:
        return
    obs_out = buf.obs
    if sim.unstable[env] != 0:
        for c in range(obs_out.shape[1]):
            obs_out[env, c] = 0.0
        return
    root_quat = sim.xquat[env, p.root_id]
    root_pos = sim.xpos[env, p.root_id]
    h = heading_quat(root_quat)
    h_inv = quat_conj(h)
    col = int(0)
    col = write_vec3(obs_out, env, col, quat_rotate_inv(root_quat, GRAVITY_DIR_W))
    col = write_vec3(obs_out, env, col, quat_rotate_inv(root_quat, sim.body_lin_vel_w[env, p.root_id]))
    col = write_vec3(obs_out, env, col, quat_rotate_inv(root_quat, sim.body_ang_vel_w[env, p.root_id]))
    nj = buf.actions.shape[1]
    for j in range(nj):
        obs_out[env, col + j] = sim.qpos[env, p.joint_qpos_start + j] - p.default_joint_pos[j]
        obs_out[env, col + nj + j] = sim.qvel[env, p.joint_dof_start + j]
        obs_out[env, col + 2 * nj + j] = buf.actions[env, j]
    col = col + 3 * nj
    nt = p.tracked_ids.shape[0]
    for k in range(nt):
        col = write_vec3(obs_out, env, col, quat_rotate_inv(h, sim.xpos[env, p.tracked_ids[k]] - root_pos))
    for k in range(nt):
        col = write_rot6d(obs_out, env, col, quat_mul(h_inv, sim.xquat[env, p.tracked_ids[k]]))

    a = p.anchor_id
    anchor_pos = sim.xpos[env, a]
    anchor_quat = sim.xquat[env, a]
    for f in range(1, ref.body_pos_w.shape[1]):
        col = write_vec3(obs_out, env, col, quat_rotate_inv(h, ref.body_pos_w[env, f, a - 1] - anchor_pos))
        col = write_rot6d(obs_out, env, col, quat_mul(quat_conj(anchor_quat), ref.body_quat_w[env, f, a - 1]))
        for k in range(nt):
            rb = p.tracked_ids[k] - 1
            col = write_vec3(obs_out, env, col, quat_rotate_inv(h, ref.body_pos_w[env, f, rb] - anchor_pos))
        for k in range(nt):
            rb = p.tracked_ids[k] - 1
            col = write_rot6d(obs_out, env, col, quat_mul(h_inv, ref.body_quat_w[env, f, rb]))

    if p.privileged != 0:
        col = write_vec3(obs_out, env, col, quat_rotate_inv(h, ref.body_lin_vel_w[env, 0, a - 1]))
        col = write_vec3(obs_out, env, col, quat_rotate_inv(h, ref.body_ang_vel_w[env, 0, a - 1]))
        for j in range(nj):
            obs_out[env, col + j] = ref.dof_vel[env, 0, j]
        col = col + nj
        for k in range(nt):
            col = write_vec3(obs_out, env, col, quat_rotate_inv(h, sim.body_lin_vel_w[env, p.tracked_ids[k]]))
        for k in range(nt):
            col = write_vec3(obs_out, env, col, quat_rotate_inv(h, sim.body_ang_vel_w[env, p.tracked_ids[k]]))


def compute_observations(sim: SimState, ref: RefState, p: ImitationParams, mask: wp.array,
                         buf: ImitationBuffers) -> None:
    """Rows of ``buf.obs`` for the envs in ``mask [N]`` (bool)."""
    wp.launch(_observations, dim=buf.obs.shape[0], inputs=[sim, ref, p, mask, buf], device=buf.obs.device)
