"""Tracking reward of the humanoid-imitation env (BeyondMimic-style exp(-err²/σ²) terms + penalties)."""

import warp as wp

from simppo.kernels.imitation_common import relative_body_pos, yaw_delta
from simppo.kernels.quat import quat_error_angle, quat_mul

# Column order of ``reward_terms_out``, ``weights`` and the episode sums.
REWARD_TERMS = (
    "anchor_pos",
    "anchor_ori",
    "body_pos",
    "body_ori",
    "body_lin_vel",
    "body_ang_vel",
    "action_rate",
    "joint_limit",
    "undesired_contacts",
)
NUM_TRACKING_TERMS = 6  # the first six are exp(-err²/σ²) with σ from ``sigmas``

vec6 = wp.types.vector(length=6, dtype=wp.float32)


@wp.kernel
def tracking_reward_kernel(
    xpos: wp.array2d(dtype=wp.vec3),
    xquat: wp.array2d(dtype=wp.vec4),
    body_lin_vel_w: wp.array2d(dtype=wp.vec3),
    body_ang_vel_w: wp.array2d(dtype=wp.vec3),
    qpos: wp.array2d(dtype=wp.float32),
    actions: wp.array2d(dtype=wp.float32),
    prev_actions: wp.array2d(dtype=wp.float32),
    undesired_contacts: wp.array(dtype=wp.float32),
    ref_body_pos_w: wp.array3d(dtype=wp.vec3),
    ref_body_quat_w: wp.array3d(dtype=wp.vec4),
    ref_body_lin_vel_w: wp.array3d(dtype=wp.vec3),
    ref_body_ang_vel_w: wp.array3d(dtype=wp.vec3),
    tracked_ids: wp.array(dtype=wp.int32),
    anchor_id: int,
    joint_qpos_start: int,
    soft_joint_lo: wp.array(dtype=wp.float32),
    soft_joint_hi: wp.array(dtype=wp.float32),
    sigmas: wp.array(dtype=wp.float32),
    weights: wp.array(dtype=wp.float32),
    reward_terms_out: wp.array2d(dtype=wp.float32),
    reward_out: wp.array(dtype=wp.float32),
    episode_sums_out: wp.array2d(dtype=wp.float32),
):
    """Per env: robot state (``xpos/xquat/... [N, nbody]`` by MuJoCo body id) against the reference at
    slot 0 of ``ref_* [N, F, B]`` (motion body ``b`` = MuJoCo body ``b + 1``).

    ``reward_terms_out [N, T]`` gets each unweighted term, ``reward_out [N]`` the weighted sum and
    ``episode_sums_out [N, T + 1]`` accumulates the weighted terms (last column: total).
    """
    env = wp.tid()
    a = anchor_id
    ref_anchor_pos = ref_body_pos_w[env, 0, a - 1]
    ref_anchor_quat = ref_body_quat_w[env, 0, a - 1]
    robot_anchor_pos = xpos[env, a]
    robot_anchor_quat = xquat[env, a]
    delta = yaw_delta(robot_anchor_quat, ref_anchor_quat)

    e_anchor_pos = wp.length_sq(ref_anchor_pos - robot_anchor_pos)
    ang = quat_error_angle(ref_anchor_quat, robot_anchor_quat)
    e_anchor_ori = ang * ang

    e_pos = float(0.0)
    e_ori = float(0.0)
    e_lin = float(0.0)
    e_ang = float(0.0)
    nt = tracked_ids.shape[0]
    for k in range(nt):
        bid = tracked_ids[k]
        rb = bid - 1
        target_pos = relative_body_pos(robot_anchor_pos, ref_anchor_pos, delta, ref_body_pos_w[env, 0, rb])
        target_quat = quat_mul(delta, ref_body_quat_w[env, 0, rb])
        e_pos += wp.length_sq(target_pos - xpos[env, bid])
        da = quat_error_angle(target_quat, xquat[env, bid])
        e_ori += da * da
        e_lin += wp.length_sq(ref_body_lin_vel_w[env, 0, rb] - body_lin_vel_w[env, bid])
        e_ang += wp.length_sq(ref_body_ang_vel_w[env, 0, rb] - body_ang_vel_w[env, bid])
    inv_nt = 1.0 / float(nt)

    action_rate = float(0.0)
    limit = float(0.0)
    for j in range(actions.shape[1]):
        d = actions[env, j] - prev_actions[env, j]
        action_rate += d * d
        q = qpos[env, joint_qpos_start + j]
        limit += wp.max(q - soft_joint_hi[j], 0.0) + wp.max(soft_joint_lo[j] - q, 0.0)

    errors = vec6(e_anchor_pos, e_anchor_ori, e_pos * inv_nt, e_ori * inv_nt, e_lin * inv_nt, e_ang * inv_nt)
    total = float(0.0)
    for i in range(6):
        s = sigmas[i]
        term = wp.exp(-errors[i] / (s * s))
        reward_terms_out[env, i] = term
        total += weights[i] * term
        episode_sums_out[env, i] += weights[i] * term
    penalties = wp.vec3(action_rate, limit, undesired_contacts[env])
    for i in range(3):
        reward_terms_out[env, 6 + i] = penalties[i]
        total += weights[6 + i] * penalties[i]
        episode_sums_out[env, 6 + i] += weights[6 + i] * penalties[i]
    reward_out[env] = total
    episode_sums_out[env, 9] += total


def launch_tracking_reward(
    xpos: wp.array2d,
    xquat: wp.array2d,
    body_lin_vel_w: wp.array2d,
    body_ang_vel_w: wp.array2d,
    qpos: wp.array2d,
    actions: wp.array2d,
    prev_actions: wp.array2d,
    undesired_contacts: wp.array,
    ref_body_pos_w: wp.array3d,
    ref_body_quat_w: wp.array3d,
    ref_body_lin_vel_w: wp.array3d,
    ref_body_ang_vel_w: wp.array3d,
    tracked_ids: wp.array,
    anchor_id: int,
    joint_qpos_start: int,
    soft_joint_lo: wp.array,
    soft_joint_hi: wp.array,
    sigmas: wp.array,
    weights: wp.array,
    reward_terms_out: wp.array2d,
    reward_out: wp.array,
    episode_sums_out: wp.array2d,
) -> None:
    wp.launch(
        tracking_reward_kernel,
        dim=xpos.shape[0],
        inputs=[xpos, xquat, body_lin_vel_w, body_ang_vel_w, qpos, actions, prev_actions, undesired_contacts,
                ref_body_pos_w, ref_body_quat_w, ref_body_lin_vel_w, ref_body_ang_vel_w, tracked_ids,
                int(anchor_id), int(joint_qpos_start), soft_joint_lo, soft_joint_hi, sigmas, weights],
        outputs=[reward_terms_out, reward_out, episode_sums_out],
        device=xpos.device,
    )
