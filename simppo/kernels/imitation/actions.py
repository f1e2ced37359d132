"""Actions → position targets of the humanoid-imitation env."""

import warp as wp

from simppo.kernels.imitation.buffers import ImitationBuffers, ImitationParams
from simppo.sim.base import SimState


@wp.kernel
def _apply_actions(p: ImitationParams, buf: ImitationBuffers, sim: SimState):
    """``buf.policy_actions [N, A]`` → ``sim.ctrl [N, A]`` = default + scale * clip(action).

    ``buf.actions`` keeps the clipped action of this step and ``buf.prev_actions`` the one before
    (read-modify-write: the old ``actions`` row moves to ``prev_actions``).
    """
    env, j = wp.tid()
    a = wp.clamp(buf.policy_actions[env, j], -p.action_clip, p.action_clip)
    buf.prev_actions[env, j] = buf.actions[env, j]
    buf.actions[env, j] = a
    sim.ctrl[env, j] = p.default_joint_pos[j] + p.action_scale[j] * a


def apply_actions(p: ImitationParams, buf: ImitationBuffers, sim: SimState) -> None:
    """Clip ``buf.policy_actions`` and write the position targets into ``sim.ctrl``."""
    wp.launch(_apply_actions, dim=buf.actions.shape, inputs=[p, buf, sim], device=buf.actions.device)
