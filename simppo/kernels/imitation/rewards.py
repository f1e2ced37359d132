"""Tracking reward of the humanoid-imitation env (BeyondMimic-style exp(-err/σ²) terms + penalties).

Term order and kinds come from :mod:`simppo.kernels.imitation.spec`; the kernel writes each term's raw
value at its spec index, then one loop turns raw values into terms, the weighted total and the sums.
"""

import warp as wp

from simppo.kernels.imitation.buffers import ImitationBuffers, ImitationParams, RefState
from simppo.kernels.imitation.common import relative_body_pos, yaw_delta
from simppo.kernels.imitation.spec import ERROR_INDEX, REWARD_INDEX, REWARD_TERMS
from simppo.kernels.quat import quat_error_angle, quat_mul
from simppo.kernels.types import SimState

NUM_TERMS = wp.constant(len(REWARD_TERMS))
ANCHOR_POS = wp.constant(REWARD_INDEX["anchor_pos"])
ANCHOR_ORI = wp.constant(REWARD_INDEX["anchor_ori"])
BODY_POS = wp.constant(REWARD_INDEX["body_pos"])
BODY_ORI = wp.constant(REWARD_INDEX["body_ori"])
BODY_LIN_VEL = wp.constant(REWARD_INDEX["body_lin_vel"])
BODY_ANG_VEL = wp.constant(REWARD_INDEX["body_ang_vel"])
ACTION_RATE = wp.constant(REWARD_INDEX["action_rate"])
JOINT_LIMIT = wp.constant(REWARD_INDEX["joint_limit"])
UNDESIRED_CONTACTS = wp.constant(REWARD_INDEX["undesired_contacts"])
SELF_COLLISIONS = wp.constant(REWARD_INDEX["self_collisions"])
ERR_ANCHOR_POS = wp.constant(ERROR_INDEX["anchor_pos"])
ERR_ANCHOR_ORI = wp.constant(ERROR_INDEX["anchor_ori"])
ERR_BODY_POS = wp.constant(ERROR_INDEX["body_pos"])
ERR_BODY_ORI = wp.constant(ERROR_INDEX["body_ori"])
ERR_JOINT_POS = wp.constant(ERROR_INDEX["joint_pos"])


@wp.kernel
def _rewards(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers):
    """Robot state (by MuJoCo body id) against reference slot 0, bodies aligned to the robot's anchor
    (x, y) and heading. Writes ``buf.reward_raw`` / ``buf.reward_terms [N, T]``, ``buf.reward [N]`` and
    adds the weighted terms to ``buf.episode_sums [N, T + 1]`` (last column: total); ``buf.errors [N, E]``
    gets the logged tracking errors. An unstable world (``sim.unstable``) gets zero raw values, terms,
    errors and reward and leaves its sums unchanged (no NaN leaks)."""
    env = wp.tid()
    if sim.unstable[env] != 0:
        for i in range(NUM_TERMS):
            buf.reward_raw[env, i] = 0.0
            buf.reward_terms[env, i] = 0.0
        for i in range(buf.errors.shape[1]):
            buf.errors[env, i] = 0.0
        buf.reward[env] = 0.0
        return
    a = p.anchor_id
    ref_anchor_pos = ref.body_pos_w[env, 0, a - 1]
    ref_anchor_quat = ref.body_quat_w[env, 0, a - 1]
    robot_anchor_pos = sim.xpos[env, a]
    robot_anchor_quat = sim.xquat[env, a]
    delta = yaw_delta(robot_anchor_quat, ref_anchor_quat)

    e_pos = float(0.0)
    e_ori = float(0.0)
    e_lin = float(0.0)
    e_ang = float(0.0)
    d_pos = float(0.0)  # sums of distances / angles (the logged errors)
    d_ori = float(0.0)
    nt = p.tracked_ids.shape[0]
    for k in range(nt):
        bid = p.tracked_ids[k]
        rb = bid - 1
        target_pos = relative_body_pos(robot_anchor_pos, ref_anchor_pos, delta, ref.body_pos_w[env, 0, rb])
        target_quat = quat_mul(delta, ref.body_quat_w[env, 0, rb])
        dp = wp.length(target_pos - sim.xpos[env, bid])
        e_pos += dp * dp
        d_pos += dp
        da = quat_error_angle(target_quat, sim.xquat[env, bid])
        e_ori += da * da
        d_ori += da
        e_lin += wp.length_sq(ref.body_lin_vel_w[env, 0, rb] - sim.body_lin_vel_w[env, bid])
        e_ang += wp.length_sq(ref.body_ang_vel_w[env, 0, rb] - sim.body_ang_vel_w[env, bid])
    inv_nt = 1.0 / float(nt)

    action_rate = float(0.0)
    limit = float(0.0)
    d_joint = float(0.0)
    nj = buf.actions.shape[1]
    for j in range(nj):
        d = buf.actions[env, j] - buf.prev_actions[env, j]
        action_rate += d * d
        q = sim.qpos[env, p.joint_qpos_start + j]
        limit += wp.max(q - p.soft_joint_hi[j], 0.0) + wp.max(p.soft_joint_lo[j] - q, 0.0)
        d_joint += wp.abs(q - ref.dof_pos[env, 0, j])

    ang = quat_error_angle(ref_anchor_quat, robot_anchor_quat)
    err = buf.errors
    err[env, ERR_ANCHOR_POS] = wp.length(ref_anchor_pos - robot_anchor_pos)
    err[env, ERR_ANCHOR_ORI] = ang
    err[env, ERR_BODY_POS] = d_pos * inv_nt
    err[env, ERR_BODY_ORI] = d_ori * inv_nt
    err[env, ERR_JOINT_POS] = d_joint / float(nj)
    raw = buf.reward_raw
    raw[env, ANCHOR_POS] = wp.length_sq(ref_anchor_pos - robot_anchor_pos)
    raw[env, ANCHOR_ORI] = ang * ang
    raw[env, BODY_POS] = e_pos * inv_nt
    raw[env, BODY_ORI] = e_ori * inv_nt
    raw[env, BODY_LIN_VEL] = e_lin * inv_nt
    raw[env, BODY_ANG_VEL] = e_ang * inv_nt
    raw[env, ACTION_RATE] = action_rate
    raw[env, JOINT_LIMIT] = limit
    raw[env, UNDESIRED_CONTACTS] = sim.penalized_contacts[env]
    raw[env, SELF_COLLISIONS] = sim.self_contacts[env]

    total = float(0.0)
    for i in range(NUM_TERMS):
        term = raw[env, i]
        if p.term_kind[i] != 0:
            s = p.sigmas[i]
            term = wp.exp(-term / (s * s))
        buf.reward_terms[env, i] = term
        total += p.weights[i] * term
        buf.episode_sums[env, i] += p.weights[i] * term
    buf.reward[env] = total
    buf.episode_sums[env, NUM_TERMS] += total


def compute_rewards(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers) -> None:
    """Reward terms, total and episode sums of every env."""
    wp.launch(_rewards, dim=buf.reward.shape[0], inputs=[sim, ref, p, buf], device=buf.reward.device)
