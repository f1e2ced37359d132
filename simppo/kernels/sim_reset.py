"""Per-world state reset for the MJWarp backend (masked write of qpos/qvel, zeroed solver state)."""

import warp as wp


@wp.kernel
def sim_reset_kernel(
    mask: wp.array(dtype=wp.int32),
    qpos_target: wp.array2d(dtype=wp.float32),
    qvel_target: wp.array2d(dtype=wp.float32),
    qpos_out: wp.array2d(dtype=wp.float32),
    qvel_out: wp.array2d(dtype=wp.float32),
    qacc_warmstart_out: wp.array2d(dtype=wp.float32),
    act_out: wp.array2d(dtype=wp.float32),
    time_out: wp.array(dtype=wp.float32),
):
    """Launch dim ``N``. For worlds with ``mask[w] != 0``: ``qpos_out[w] = qpos_target[w]`` ``[N, nq]``,
    ``qvel_out[w] = qvel_target[w]`` ``[N, nv]``, ``qacc_warmstart_out[w] = 0`` ``[N, nv]``,
    ``act_out[w] = 0`` ``[N, na]``, ``time_out[w] = 0``. Other worlds are not written."""
    w = wp.tid()
    if mask[w] == 0:
        return
    for i in range(qpos_out.shape[1]):
        qpos_out[w, i] = qpos_target[w, i]
    for i in range(qvel_out.shape[1]):
        qvel_out[w, i] = qvel_target[w, i]
        qacc_warmstart_out[w, i] = 0.0
    for i in range(act_out.shape[1]):
        act_out[w, i] = 0.0
    time_out[w] = 0.0


def launch_sim_reset(
    mask: wp.array,
    qpos_target: wp.array,
    qvel_target: wp.array,
    qpos_out: wp.array,
    qvel_out: wp.array,
    qacc_warmstart_out: wp.array,
    act_out: wp.array,
    time_out: wp.array,
) -> None:
    """Typed wrapper; ``mask [N]`` int32, targets ``[N, nq]`` / ``[N, nv]`` float32."""
    wp.launch(
        sim_reset_kernel,
        dim=qpos_out.shape[0],
        inputs=[mask, qpos_target, qvel_target],
        outputs=[qpos_out, qvel_out, qacc_warmstart_out, act_out, time_out],
        device=qpos_out.device,
    )
