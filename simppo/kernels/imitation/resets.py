"""Reference-state initialisation: simulator targets for the envs being reset."""

import warp as wp

from simppo.kernels.imitation.buffers import ImitationBuffers, ImitationParams, RefState
from simppo.kernels.quat import quat_normalize, quat_rotate_inv


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
