"""Termination and truncation flags of the humanoid-imitation env."""

import warp as wp

from simppo.kernels.imitation.buffers import ImitationBuffers, ImitationParams, RefState
from simppo.kernels.imitation.common import GRAVITY_DIR_W
from simppo.kernels.imitation.spec import CAUSE_CODE
from simppo.kernels.quat import quat_rotate_inv
from simppo.kernels.types import SimState

ANCHOR_HEIGHT = wp.constant(CAUSE_CODE["anchor_height"])
ANCHOR_ORI = wp.constant(CAUSE_CODE["anchor_ori"])
EE_HEIGHT = wp.constant(CAUSE_CODE["ee_height"])
BODY_POS = wp.constant(CAUSE_CODE["body_pos"])
UNSTABLE = wp.constant(CAUSE_CODE["unstable"])
CLIP_END = wp.constant(CAUSE_CODE["clip_end"])
TIMEOUT = wp.constant(CAUSE_CODE["timeout"])


@wp.kernel
def _terminations(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers):
    """Every end cause of ``spec.END_CAUSES`` is tested: anchor height error, anchor orientation error
    (difference of the z components of gravity projected into the anchor frames), any end-effector height error
    above its threshold, the mean world-frame distance of all bodies above its threshold (global drift), an
    unstable simulator world, the clip's end (``times >= motion length``, when ``truncate_at_clip_end``),
    ``episode_length >= max_episode_steps``. The three distance thresholds are multiplied by
    ``buf.term_scale[0]`` (the termination curriculum's factor), the orientation's is not: a fall is a fall.
    Reference at slot 0; motion body ``b`` = MuJoCo body ``b + 1``.

    # Data in: sim.xpos, sim.xquat, sim.unstable; ref.body_pos_w (slot 0, every body), ref.body_quat_w; buf.times,
    #   buf.motion_ids, buf.episode_length, buf.term_scale; p.anchor_id, p.ee_ids, the thresholds, p.ending_causes
    # Data out: buf.fail_bits (every cause that holds), buf.term_cause (the first, in spec order, of those in
    #   p.ending_causes; 0: none), buf.terminated (a termination cause ends it), buf.truncated (a time-out does)
    """
    env = wp.tid()
    a = p.anchor_id
    ref_anchor_pos = ref.body_pos_w[env, 0, a - 1]
    g_ref = quat_rotate_inv(ref.body_quat_w[env, 0, a - 1], GRAVITY_DIR_W)
    g_robot = quat_rotate_inv(sim.xquat[env, a], GRAVITY_DIR_W)
    scale = buf.term_scale[0]  # the termination curriculum's factor on the distance thresholds (1: as configured)
    ee_limit = p.ee_height * scale
    ee_failed = bool(False)
    for k in range(p.ee_ids.shape[0]):
        bid = p.ee_ids[k]
        ee_failed = ee_failed or wp.abs(ref.body_pos_w[env, 0, bid - 1][2] - sim.xpos[env, bid][2]) > ee_limit
    num_bodies = ref.body_pos_w.shape[2]
    dist_sum = float(0.0)
    if p.body_pos < 1.0e30:  # off (inf) by default: no per-body loop on the hot path then
        for b in range(num_bodies):
            dist_sum += wp.length(ref.body_pos_w[env, 0, b] - sim.xpos[env, b + 1])
    bits = int(0)
    if wp.abs(ref_anchor_pos[2] - sim.xpos[env, a][2]) > p.anchor_height * scale:
        bits = bits | (1 << (ANCHOR_HEIGHT - 1))
    if wp.abs(g_ref[2] - g_robot[2]) > p.anchor_ori:
        bits = bits | (1 << (ANCHOR_ORI - 1))
    if ee_failed:
        bits = bits | (1 << (EE_HEIGHT - 1))
    if dist_sum > p.body_pos * scale * float(num_bodies):
        bits = bits | (1 << (BODY_POS - 1))
    if sim.unstable[env] != 0:
        bits = bits | (1 << (UNSTABLE - 1))
    if p.truncate_at_clip_end != 0 and buf.times[env] >= p.motion_lengths[buf.motion_ids[env]]:
        bits = bits | (1 << (CLIP_END - 1))
    if buf.episode_length[env] >= p.max_episode_steps:
        bits = bits | (1 << (TIMEOUT - 1))
    ending = bits & p.ending_causes
    cause = int(0)
    for code in range(TIMEOUT, 0, -1):  # the lowest code (the first in spec order) wins
        if (ending >> (code - 1)) & 1 != 0:
            cause = code
    buf.fail_bits[env] = bits
    buf.terminated[env] = cause != 0 and cause < CLIP_END
    buf.truncated[env] = cause >= CLIP_END
    buf.term_cause[env] = cause


def compute_terminations(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers) -> None:
    """``buf.fail_bits``, ``buf.term_cause``, ``buf.terminated`` / ``buf.truncated [N]`` of every env."""
    wp.launch(_terminations, dim=buf.reward.shape[0], inputs=[sim, ref, p, buf], device=buf.reward.device)
