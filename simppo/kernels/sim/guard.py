"""Instability guard: flag worlds whose state is non-finite or out of sane bounds."""

import warp as wp


@wp.struct
class GuardBuffers:
    """``qpos [N, nq]``, ``qvel [N, nv]``; ``root_height_adr`` (qpos index of the free joint's z, -1 = none),
    bounds; outputs ``unstable_out [N]`` int32 (1 = unstable) and ``count_out [1]`` int32."""

    qpos: wp.array2d(dtype=wp.float32)
    qvel: wp.array2d(dtype=wp.float32)
    root_height_adr: wp.int32
    max_qvel: wp.float32
    min_height: wp.float32
    max_height: wp.float32
    unstable_out: wp.array(dtype=wp.int32)
    count_out: wp.array(dtype=wp.int32)


@wp.kernel
def guard_kernel(b: GuardBuffers):
    """Launch dim ``N``. Unstable: any NaN/inf in qpos/qvel, any ``|qvel| > max_qvel``, or (if
    ``root_height_adr >= 0``) ``qpos[root_height_adr]`` outside ``[min_height, max_height]``.

    # Data in: b.qpos, b.qvel, the bounds
    # Data out: b.unstable_out [N], b.count_out[0] (added to)
    """
    w = wp.tid()
    bad = wp.int32(0)
    for i in range(b.qpos.shape[1]):
        if not wp.isfinite(b.qpos[w, i]):
            bad = wp.int32(1)
    for i in range(b.qvel.shape[1]):
        v = b.qvel[w, i]
        if not wp.isfinite(v):
            bad = wp.int32(1)
        elif wp.abs(v) > b.max_qvel:
            bad = wp.int32(1)
    if b.root_height_adr >= 0:
        h = b.qpos[w, b.root_height_adr]
        if h < b.min_height or h > b.max_height:
            bad = wp.int32(1)
    b.unstable_out[w] = bad
    if bad != 0:
        wp.atomic_add(b.count_out, 0, 1)


def guard(b: GuardBuffers) -> None:
    """Zero ``count_out``, then flag every world: ``unstable_out [N]``, ``count_out[0]`` = number flagged."""
    b.count_out.zero_()
    wp.launch(guard_kernel, dim=b.qpos.shape[0], inputs=[b], device=b.qpos.device)
