"""Masked per-world state reset for the MJWarp backend (qpos/qvel from targets, solver state cleared)."""

import warp as wp


@wp.struct
class ResetBuffers:
    """``mask [N]`` bool and targets ``qpos_target [N, nq]`` / ``qvel_target [N, nv]`` (inputs); the
    backend state ``qpos_out``, ``qvel_out``, ``qacc_warmstart_out [N, nv]``, ``act_out [N, na]``,
    ``time_out [N]`` (outputs, written only where ``mask`` is set)."""

    mask: wp.array(dtype=wp.bool)
    qpos_target: wp.array2d(dtype=wp.float32)
    qvel_target: wp.array2d(dtype=wp.float32)
    qpos_out: wp.array2d(dtype=wp.float32)
    qvel_out: wp.array2d(dtype=wp.float32)
    qacc_warmstart_out: wp.array2d(dtype=wp.float32)
    act_out: wp.array2d(dtype=wp.float32)
    time_out: wp.array(dtype=wp.float32)


@wp.kernel
def reset_kernel(b: ResetBuffers):
    """Launch dim ``N``. Where ``mask[w]``: qpos/qvel = targets, warm start, act and time = 0.

    # Data in: b.mask, b.qpos_target, b.qvel_target
    # Data out: b.qpos_out, b.qvel_out, b.qacc_warmstart_out, b.act_out, b.time_out (masked worlds)
    """
    w = wp.tid()
    if not b.mask[w]:
        return
    for i in range(b.qpos_out.shape[1]):
        b.qpos_out[w, i] = b.qpos_target[w, i]
    for i in range(b.qvel_out.shape[1]):
        b.qvel_out[w, i] = b.qvel_target[w, i]
        b.qacc_warmstart_out[w, i] = 0.0
    for i in range(b.act_out.shape[1]):
        b.act_out[w, i] = 0.0
    b.time_out[w] = 0.0


def reset(b: ResetBuffers) -> None:
    """Masked write of the targets into the worlds where ``mask`` is set; other worlds are not written."""
    wp.launch(reset_kernel, dim=b.qpos_out.shape[0], inputs=[b], device=b.qpos_out.device)
