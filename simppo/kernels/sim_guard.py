"""Instability guard: flag worlds whose state is non-finite or out of sane bounds."""

import warp as wp


@wp.kernel
def sim_guard_kernel(
    qpos: wp.array2d(dtype=wp.float32),
    qvel: wp.array2d(dtype=wp.float32),
    root_height_adr: int,
    max_qvel: float,
    min_height: float,
    max_height: float,
    unstable_out: wp.array(dtype=wp.int32),
    count_out: wp.array(dtype=wp.int32),
):
    """Launch dim ``N``. ``qpos [N, nq]``, ``qvel [N, nv]`` → ``unstable_out [N]`` (1 = unstable) and
    ``count_out [1]`` += number of unstable worlds (zero it before launching).

    Unstable: any NaN/inf in qpos/qvel, any ``|qvel| > max_qvel``, or (if ``root_height_adr >= 0``)
    ``qpos[root_height_adr]`` outside ``[min_height, max_height]``."""
    w = wp.tid()
    bad = wp.int32(0)
    for i in range(qpos.shape[1]):
        x = qpos[w, i]
        if not wp.isfinite(x):
            bad = wp.int32(1)
    for i in range(qvel.shape[1]):
        v = qvel[w, i]
        if not wp.isfinite(v):
            bad = wp.int32(1)
        elif wp.abs(v) > max_qvel:
            bad = wp.int32(1)
    if root_height_adr >= 0:
        h = qpos[w, root_height_adr]
        if h < min_height or h > max_height:
            bad = wp.int32(1)
    unstable_out[w] = bad
    if bad != 0:
        wp.atomic_add(count_out, 0, 1)


def launch_sim_guard(
    qpos: wp.array,
    qvel: wp.array,
    root_height_adr: int,
    max_qvel: float,
    min_height: float,
    max_height: float,
    unstable_out: wp.array,
    count_out: wp.array,
) -> None:
    """Typed wrapper; zeroes ``count_out [1]`` then launches over the ``N`` worlds."""
    count_out.zero_()
    wp.launch(
        sim_guard_kernel,
        dim=qpos.shape[0],
        inputs=[qpos, qvel, int(root_height_adr), float(max_qvel), float(min_height), float(max_height)],
        outputs=[unstable_out, count_out],
        device=qpos.device,
    )
