"""Actions → position targets of the humanoid-imitation env."""

import warp as wp

from simppo.kernels.imitation.buffers import ImitationBuffers, ImitationParams, RefState
from simppo.kernels.types import SimState


@wp.kernel
def _apply_actions(p: ImitationParams, ref: RefState, buf: ImitationBuffers, sim: SimState):
    """``buf.policy_actions [N, A]`` → ``sim.ctrl [N, A]`` = offset + scale * the clipped action of
    ``buf.action_delay[env]`` steps ago, where offset = the env's default pose blended with the reference's joint
    angles ``env.action_reference_lead`` control steps ahead (``ref.dof_pos`` frame ``p.action_ref_frame``) by
    ``p.action_ref_weight`` (0: the default pose, 1: the reference plus the env's calibration offset), plus
    ``p.action_ref_vel_weight`` x kd / kp x the reference's joint velocity of that frame (the servo then damps
    towards that velocity rather than towards rest).

    ``buf.actions`` keeps the clipped action of this step and ``buf.prev_actions`` the one before
    (read-modify-write: the old ``actions`` row moves to ``prev_actions``); ``buf.action_history [N, H, A]``
    shifts by one slot (slot 0 = this step's action). Each thread owns one ``(env, joint)`` column.

    # Data in: buf.policy_actions, buf.action_delay, buf.default_joint_pos, ref.dof_pos, p.action_clip,
    #          p.action_scale, p.default_joint_pos, p.action_ref_weight, p.action_ref_frame, ref.dof_vel,
    #          p.action_ref_vel_weight, p.damping_over_stiffness
    # Data out: sim.ctrl; buf.actions, buf.prev_actions, buf.action_history (read-modify-write)
    """
    env, j = wp.tid()
    a = wp.clamp(buf.policy_actions[env, j], -p.action_clip, p.action_clip)
    buf.prev_actions[env, j] = buf.actions[env, j]
    buf.actions[env, j] = a
    hist = buf.action_history
    for k in range(hist.shape[1] - 1, 0, -1):
        hist[env, k, j] = hist[env, k - 1, j]
    hist[env, 0, j] = a
    offset = buf.default_joint_pos[env, j]
    if p.action_ref_weight != 0.0:
        w = p.action_ref_weight
        offset += w * (ref.dof_pos[env, p.action_ref_frame, j] - p.default_joint_pos[j])
    if p.action_ref_vel_weight != 0.0:  # kp (q* + kd/kp w v - q) - kd qdot = kp (q* - q) + kd (w v - qdot)
        v = ref.dof_vel[env, p.action_ref_frame, j]
        offset += p.action_ref_vel_weight * p.damping_over_stiffness[j] * v
    sim.ctrl[env, j] = offset + p.action_scale[j] * hist[env, buf.action_delay[env], j]


def apply_actions(p: ImitationParams, ref: RefState, buf: ImitationBuffers, sim: SimState) -> None:
    """Clip ``buf.policy_actions`` and write the (delayed) position targets into ``sim.ctrl``; reads the
    reference of this step's observation (``ref`` before it moves on to the next step)."""
    wp.launch(_apply_actions, dim=buf.actions.shape, inputs=[p, ref, buf, sim], device=buf.actions.device)
