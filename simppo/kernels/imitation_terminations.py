"""Termination and truncation flags of the humanoid-imitation env."""

import warp as wp

from simppo.kernels.imitation_common import GRAVITY_DIR_W
from simppo.kernels.quat import quat_rotate_inv


@wp.kernel
def tracking_termination_kernel(
    xpos: wp.array2d(dtype=wp.vec3),
    xquat: wp.array2d(dtype=wp.vec4),
    ref_body_pos_w: wp.array3d(dtype=wp.vec3),
    ref_body_quat_w: wp.array3d(dtype=wp.vec4),
    unstable: wp.array(dtype=wp.int32),
    motion_ids: wp.array(dtype=wp.int32),
    times: wp.array(dtype=wp.float32),
    motion_lengths: wp.array(dtype=wp.float32),
    episode_length: wp.array(dtype=wp.int32),
    end_effector_ids: wp.array(dtype=wp.int32),
    anchor_id: int,
    anchor_height_threshold: float,
    anchor_ori_threshold: float,
    ee_height_threshold: float,
    max_episode_steps: int,
    truncate_at_clip_end: int,
    terminated_out: wp.array(dtype=wp.bool),
    truncated_out: wp.array(dtype=wp.bool),
):
    """``terminated``: anchor height error, anchor orientation error (difference of the z components of
    gravity projected into the anchor frames), any end-effector height error above its threshold, or
    an unstable simulator world. ``truncated`` (bootstrapped; only where not terminated): the clip
    ended (``times >= motion length``, when ``truncate_at_clip_end``) or ``episode_length >= max_episode_steps``.
    Reference at slot 0 of ``ref_* [N, F, B]``; motion body ``b`` = MuJoCo body ``b + 1``.
    """
    env = wp.tid()
    a = anchor_id
    ref_anchor_pos = ref_body_pos_w[env, 0, a - 1]
    failed = wp.abs(ref_anchor_pos[2] - xpos[env, a][2]) > anchor_height_threshold
    g_ref = quat_rotate_inv(ref_body_quat_w[env, 0, a - 1], GRAVITY_DIR_W)
    g_robot = quat_rotate_inv(xquat[env, a], GRAVITY_DIR_W)
    failed = failed or wp.abs(g_ref[2] - g_robot[2]) > anchor_ori_threshold
    for k in range(end_effector_ids.shape[0]):
        bid = end_effector_ids[k]
        failed = failed or wp.abs(ref_body_pos_w[env, 0, bid - 1][2] - xpos[env, bid][2]) > ee_height_threshold
    failed = failed or unstable[env] != 0
    clip_end = truncate_at_clip_end != 0 and times[env] >= motion_lengths[motion_ids[env]]
    timeout = episode_length[env] >= max_episode_steps
    terminated_out[env] = failed
    truncated_out[env] = (not failed) and (clip_end or timeout)


def launch_tracking_termination(
    xpos: wp.array2d,
    xquat: wp.array2d,
    ref_body_pos_w: wp.array3d,
    ref_body_quat_w: wp.array3d,
    unstable: wp.array,
    motion_ids: wp.array,
    times: wp.array,
    motion_lengths: wp.array,
    episode_length: wp.array,
    end_effector_ids: wp.array,
    anchor_id: int,
    anchor_height_threshold: float,
    anchor_ori_threshold: float,
    ee_height_threshold: float,
    max_episode_steps: int,
    truncate_at_clip_end: int,
    terminated_out: wp.array,
    truncated_out: wp.array,
) -> None:
    wp.launch(
        tracking_termination_kernel,
        dim=xpos.shape[0],
        inputs=[xpos, xquat, ref_body_pos_w, ref_body_quat_w, unstable, motion_ids, times, motion_lengths,
                episode_length, end_effector_ids, int(anchor_id), float(anchor_height_threshold),
                float(anchor_ori_threshold), float(ee_height_threshold), int(max_episode_steps),
                int(truncate_at_clip_end)],
        outputs=[terminated_out, truncated_out],
        device=xpos.device,
    )
