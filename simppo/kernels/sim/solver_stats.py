"""MJWarp's constraint-solver iterations (``Data.solver_niter``), summed and maxed over worlds after every physics
step, so that the solver's work on the states training visits is known without reading anything per step.

mujoco_warp's Newton/CG loop runs over every world until the slowest converges (or hits ``opt.iterations``):
the mean says what the worlds need, the max what they all pay.
"""

import warp as wp


@wp.struct
class SolverStatsBuffers:
    """``solver_niter [N]`` int32 (MJWarp's iterations of the last physics step per world); outputs
    ``iterations_out [1]`` float64 (added to: iterations summed over worlds and physics steps) and ``max_out [1]``
    int32 (the largest per-world count seen), both accumulated until the owner zeroes them."""

    solver_niter: wp.array(dtype=wp.int32)
    iterations_out: wp.array(dtype=wp.float64)
    max_out: wp.array(dtype=wp.int32)


@wp.kernel
def solver_stats_kernel(b: SolverStatsBuffers):
    """Launch dim ``N``.

    # Data in: b.solver_niter
    # Data out: b.iterations_out[0] (added to), b.max_out[0] (max with)
    """
    w = wp.tid()
    n = b.solver_niter[w]
    wp.atomic_add(b.iterations_out, 0, wp.float64(n))
    wp.atomic_max(b.max_out, 0, n)


def accumulate_solver_stats(b: SolverStatsBuffers) -> None:
    """``iterations_out[0]`` += sum of ``solver_niter``; ``max_out[0]`` = max(``max_out[0]``, max ``solver_niter``)."""
    wp.launch(solver_stats_kernel, dim=b.solver_niter.shape[0], inputs=[b], device=b.solver_niter.device)
