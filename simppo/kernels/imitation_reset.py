"""Reference-state initialisation: simulator targets for the envs being reset."""

import warp as wp

from simppo.kernels.quat import quat_normalize, quat_rotate_inv


@wp.kernel
def reference_state_kernel(
    mask: wp.array(dtype=wp.bool),
    ref_root_pos: wp.array2d(dtype=wp.vec3),
    ref_root_quat: wp.array2d(dtype=wp.vec4),
    ref_root_lin_vel_w: wp.array2d(dtype=wp.vec3),
    ref_root_ang_vel_w: wp.array2d(dtype=wp.vec3),
    ref_dof_pos: wp.array3d(dtype=wp.float32),
    ref_dof_vel: wp.array3d(dtype=wp.float32),
    joint_qpos_start: int,
    joint_dof_start: int,
    qpos_target_out: wp.array2d(dtype=wp.float32),
    qvel_target_out: wp.array2d(dtype=wp.float32),
    actions_out: wp.array2d(dtype=wp.float32),
    prev_actions_out: wp.array2d(dtype=wp.float32),
):
    """For envs where ``mask [N]``: free-joint qpos (pos, wxyz quat) and qvel (world linear velocity,
    body-frame angular velocity, as MuJoCo's free joint wants) plus joint pos/vel from slot 0 of the
    reference ``ref_* [N, F, ...]``; their last actions are zeroed. Other rows are left untouched."""
    env = wp.tid()
    if not mask[env]:
        return
    p = ref_root_pos[env, 0]
    q = quat_normalize(ref_root_quat[env, 0])
    w_b = quat_rotate_inv(q, ref_root_ang_vel_w[env, 0])
    v = ref_root_lin_vel_w[env, 0]
    for i in range(3):
        qpos_target_out[env, i] = p[i]
        qvel_target_out[env, i] = v[i]
        qvel_target_out[env, 3 + i] = w_b[i]
    for i in range(4):
        qpos_target_out[env, 3 + i] = q[i]
    for j in range(ref_dof_pos.shape[2]):
        qpos_target_out[env, joint_qpos_start + j] = ref_dof_pos[env, 0, j]
        qvel_target_out[env, joint_dof_start + j] = ref_dof_vel[env, 0, j]
    for j in range(actions_out.shape[1]):
        actions_out[env, j] = 0.0
        prev_actions_out[env, j] = 0.0


def launch_reference_state(
    mask: wp.array,
    ref_root_pos: wp.array2d,
    ref_root_quat: wp.array2d,
    ref_root_lin_vel_w: wp.array2d,
    ref_root_ang_vel_w: wp.array2d,
    ref_dof_pos: wp.array3d,
    ref_dof_vel: wp.array3d,
    joint_qpos_start: int,
    joint_dof_start: int,
    qpos_target_out: wp.array2d,
    qvel_target_out: wp.array2d,
    actions_out: wp.array2d,
    prev_actions_out: wp.array2d,
) -> None:
    wp.launch(
        reference_state_kernel,
        dim=mask.shape[0],
        inputs=[mask, ref_root_pos, ref_root_quat, ref_root_lin_vel_w, ref_root_ang_vel_w, ref_dof_pos, ref_dof_vel,
                int(joint_qpos_start), int(joint_dof_start)],
        outputs=[qpos_target_out, qvel_target_out, actions_out, prev_actions_out],
        device=mask.device,
    )
