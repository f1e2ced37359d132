"""Observation kernel of the humanoid-imitation env: one thread per env writes one row of ``obs_out``.

Row layout (``A`` joints, ``Nt`` tracked bodies, ``K`` future frames). Vectors are in the robot
root's heading (yaw) frame except the three ``_b`` entries, which are in the full root-body frame:

actor part
  gravity_b (3) · root_lin_vel_b (3) · root_ang_vel_b (3) · joint_pos_rel (A) ·
  joint_vel (A) · last_action (A) · body_pos (3·Nt, relative to the root) · body_rot6d (6·Nt)
  then for each future frame k = 1..K:
  anchor_pos_delta (3, reference anchor − robot anchor) · anchor_rot6d (6, robot anchor frame) ·
  target_body_pos (3·Nt, reference body − robot anchor) · target_body_rot6d (6·Nt)
privileged critic part (``privileged`` = 1)
  ref_anchor_lin_vel (3) · ref_anchor_ang_vel (3) · ref_joint_vel (A) ·
  body_lin_vel (3·Nt) · body_ang_vel (3·Nt)
Rotations are 6D: the first two columns of the rotation matrix, row-major.
"""

import warp as wp

from simppo.kernels.imitation_common import GRAVITY_DIR_W, write_rot6d, write_vec3
from simppo.kernels.quat import heading_quat, quat_conj, quat_mul, quat_rotate_inv


def actor_obs_dim(num_joints: int, num_tracked: int, num_future: int) -> int:
    return 9 + 3 * num_joints + 9 * num_tracked + num_future * (9 + 9 * num_tracked)


def critic_extra_dim(num_joints: int, num_tracked: int) -> int:
    return 6 + num_joints + 6 * num_tracked


@wp.kernel
def tracking_obs_kernel(
    xpos: wp.array2d(dtype=wp.vec3),
    xquat: wp.array2d(dtype=wp.vec4),
    body_lin_vel_w: wp.array2d(dtype=wp.vec3),
    body_ang_vel_w: wp.array2d(dtype=wp.vec3),
    qpos: wp.array2d(dtype=wp.float32),
    qvel: wp.array2d(dtype=wp.float32),
    actions: wp.array2d(dtype=wp.float32),
    ref_body_pos_w: wp.array3d(dtype=wp.vec3),
    ref_body_quat_w: wp.array3d(dtype=wp.vec4),
    ref_body_lin_vel_w: wp.array3d(dtype=wp.vec3),
    ref_body_ang_vel_w: wp.array3d(dtype=wp.vec3),
    ref_dof_vel: wp.array3d(dtype=wp.float32),
    default_joint_pos: wp.array(dtype=wp.float32),
    tracked_ids: wp.array(dtype=wp.int32),
    root_id: int,
    anchor_id: int,
    joint_qpos_start: int,
    joint_dof_start: int,
    privileged: int,
    obs_out: wp.array2d(dtype=wp.float32),
):
    """Robot state ``[N, nbody]`` by MuJoCo body id; reference ``ref_* [N, F, B]`` with slot 0 = now and
    slots 1..F-1 = future frames (motion body ``b`` = MuJoCo body ``b + 1``). Writes ``obs_out [N, D]``."""
    env = wp.tid()
    root_pos = xpos[env, root_id]
    root_quat = xquat[env, root_id]
    h = heading_quat(root_quat)
    h_inv = quat_conj(h)
    col = int(0)
    col = write_vec3(obs_out, env, col, quat_rotate_inv(root_quat, GRAVITY_DIR_W))
    col = write_vec3(obs_out, env, col, quat_rotate_inv(root_quat, body_lin_vel_w[env, root_id]))
    col = write_vec3(obs_out, env, col, quat_rotate_inv(root_quat, body_ang_vel_w[env, root_id]))
    nj = actions.shape[1]
    for j in range(nj):
        obs_out[env, col + j] = qpos[env, joint_qpos_start + j] - default_joint_pos[j]
        obs_out[env, col + nj + j] = qvel[env, joint_dof_start + j]
        obs_out[env, col + 2 * nj + j] = actions[env, j]
    col = col + 3 * nj
    nt = tracked_ids.shape[0]
    for k in range(nt):
        bid = tracked_ids[k]
        col = write_vec3(obs_out, env, col, quat_rotate_inv(h, xpos[env, bid] - root_pos))
    for k in range(nt):
        col = write_rot6d(obs_out, env, col, quat_mul(h_inv, xquat[env, tracked_ids[k]]))

    anchor_pos = xpos[env, anchor_id]
    anchor_quat = xquat[env, anchor_id]
    for f in range(1, ref_body_pos_w.shape[1]):
        col = write_vec3(obs_out, env, col, quat_rotate_inv(h, ref_body_pos_w[env, f, anchor_id - 1] - anchor_pos))
        col = write_rot6d(obs_out, env, col, quat_mul(quat_conj(anchor_quat), ref_body_quat_w[env, f, anchor_id - 1]))
        for k in range(nt):
            rb = tracked_ids[k] - 1
            col = write_vec3(obs_out, env, col, quat_rotate_inv(h, ref_body_pos_w[env, f, rb] - anchor_pos))
        for k in range(nt):
            rb = tracked_ids[k] - 1
            col = write_rot6d(obs_out, env, col, quat_mul(h_inv, ref_body_quat_w[env, f, rb]))

    if privileged != 0:
        col = write_vec3(obs_out, env, col, quat_rotate_inv(h, ref_body_lin_vel_w[env, 0, anchor_id - 1]))
        col = write_vec3(obs_out, env, col, quat_rotate_inv(h, ref_body_ang_vel_w[env, 0, anchor_id - 1]))
        for j in range(nj):
            obs_out[env, col + j] = ref_dof_vel[env, 0, j]
        col = col + nj
        for k in range(nt):
            col = write_vec3(obs_out, env, col, quat_rotate_inv(h, body_lin_vel_w[env, tracked_ids[k]]))
        for k in range(nt):
            col = write_vec3(obs_out, env, col, quat_rotate_inv(h, body_ang_vel_w[env, tracked_ids[k]]))


def launch_tracking_obs(
    xpos: wp.array2d,
    xquat: wp.array2d,
    body_lin_vel_w: wp.array2d,
    body_ang_vel_w: wp.array2d,
    qpos: wp.array2d,
    qvel: wp.array2d,
    actions: wp.array2d,
    ref_body_pos_w: wp.array3d,
    ref_body_quat_w: wp.array3d,
    ref_body_lin_vel_w: wp.array3d,
    ref_body_ang_vel_w: wp.array3d,
    ref_dof_vel: wp.array3d,
    default_joint_pos: wp.array,
    tracked_ids: wp.array,
    root_id: int,
    anchor_id: int,
    joint_qpos_start: int,
    joint_dof_start: int,
    privileged: bool,
    obs_out: wp.array2d,
) -> None:
    wp.launch(
        tracking_obs_kernel,
        dim=xpos.shape[0],
        inputs=[xpos, xquat, body_lin_vel_w, body_ang_vel_w, qpos, qvel, actions, ref_body_pos_w, ref_body_quat_w,
                ref_body_lin_vel_w, ref_body_ang_vel_w, ref_dof_vel, default_joint_pos, tracked_ids, int(root_id),
                int(anchor_id), int(joint_qpos_start), int(joint_dof_start), int(bool(privileged))],
        outputs=[obs_out],
        device=xpos.device,
    )
