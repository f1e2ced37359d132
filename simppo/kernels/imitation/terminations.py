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
UNSTABLE = wp.constant(CAUSE_CODE["unstable"])
CLIP_END = wp.constant(CAUSE_CODE["clip_end"])
TIMEOUT = wp.constant(CAUSE_CODE["timeout"])


@wp.kernel
def _terminations(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers):
    """``terminated``: anchor height error, anchor orientation error (difference of the z components of
    gravity projected into the anchor frames), any end-effector height error above its threshold, or
    an unstable simulator world. ``truncated`` (bootstrapped; only where not terminated): the clip
    ended (``times >= motion length``, when ``truncate_at_clip_end``) or ``episode_length >=
    max_episode_steps``. Reference at slot 0; motion body ``b`` = MuJoCo body ``b + 1``. ``term_cause``
    gets the code of the first condition that fired (terminations in spec order, then truncations).
    """
    env = wp.tid()
    a = p.anchor_id
    ref_anchor_pos = ref.body_pos_w[env, 0, a - 1]
    g_ref = quat_rotate_inv(ref.body_quat_w[env, 0, a - 1], GRAVITY_DIR_W)
    g_robot = quat_rotate_inv(sim.xquat[env, a], GRAVITY_DIR_W)
    ee_failed = bool(False)
    for k in range(p.ee_ids.shape[0]):
        bid = p.ee_ids[k]
        ee_failed = ee_failed or wp.abs(ref.body_pos_w[env, 0, bid - 1][2] - sim.xpos[env, bid][2]) > p.ee_height
    clip_end = p.truncate_at_clip_end != 0 and buf.times[env] >= p.motion_lengths[buf.motion_ids[env]]
    timeout = buf.episode_length[env] >= p.max_episode_steps
    cause = int(0)
    if timeout:
        cause = TIMEOUT
    if clip_end:
        cause = CLIP_END
    if sim.unstable[env] != 0:
        cause = UNSTABLE
    if ee_failed:
        cause = EE_HEIGHT
    if wp.abs(g_ref[2] - g_robot[2]) > p.anchor_ori:
        cause = ANCHOR_ORI
    if wp.abs(ref_anchor_pos[2] - sim.xpos[env, a][2]) > p.anchor_height:
        cause = ANCHOR_HEIGHT
    failed = cause != 0 and cause < CLIP_END
    buf.terminated[env] = failed
    buf.truncated[env] = cause >= CLIP_END
    buf.term_cause[env] = cause


def compute_terminations(sim: SimState, ref: RefState, p: ImitationParams, buf: ImitationBuffers) -> None:
    """``buf.terminated`` / ``buf.truncated [N]`` of every env."""
    wp.launch(_terminations, dim=buf.reward.shape[0], inputs=[sim, ref, p, buf], device=buf.reward.device)
