"""Per-step episode bookkeeping of the imitation env: the clock, the step's records, and the closing of the
episodes that ended (their statistics, the reset mask, cleared sums). Kernels instead of torch ops so that the
whole env step is Warp launches on bound buffers (capturable as one graph).

Entry points, in step order: :func:`advance_clock`, :func:`record_step`, :func:`close_episodes`; and
:func:`copy_rows` for the terminal observations.
"""

import warp as wp

from simppo.kernels.types import SimState


@wp.struct
class EpisodeBuffers:
    """Per env ``[N]``: ``episode_length`` (int32), ``times`` (s), ``terminated`` / ``truncated`` (bool),
    ``term_cause`` (``spec.CAUSE_CODE``), ``episode_sums [N, T + 1]``, ``errors [N, E]``; outputs
    ``done_out`` (bool), ``reset_mask_out`` (bool, = done: the envs the reset stages act on),
    ``done_stats_out [N, T + 2 + C]`` (episode sums, length, one-hot end cause of ``cause_codes [C]``),
    ``step_unstable_out`` (bool), ``step_num_unstable_out [1]``, ``error_sum_out [E]`` (accumulated).
    ``dt``: the control step (s)."""

    episode_length: wp.array(dtype=wp.int32)
    times: wp.array(dtype=wp.float32)
    terminated: wp.array(dtype=wp.bool)
    truncated: wp.array(dtype=wp.bool)
    term_cause: wp.array(dtype=wp.int32)
    cause_codes: wp.array(dtype=wp.int32)
    episode_sums: wp.array2d(dtype=wp.float32)
    errors: wp.array2d(dtype=wp.float32)
    done_out: wp.array(dtype=wp.bool)
    reset_mask_out: wp.array(dtype=wp.bool)
    done_stats_out: wp.array2d(dtype=wp.float32)
    step_unstable_out: wp.array(dtype=wp.bool)
    step_num_unstable_out: wp.array(dtype=wp.int32)
    error_sum_out: wp.array(dtype=wp.float32)
    dt: float


@wp.kernel
def _advance_clock(b: EpisodeBuffers):
    """Launch dim ``N``: the episode is one control step longer and its reference time ``dt`` later.

    # Data in: b.dt
    # Data out: b.episode_length, b.times (read-modify-write); b.step_num_unstable_out (zeroed by env 0)
    """
    env = wp.tid()
    b.episode_length[env] = b.episode_length[env] + 1
    b.times[env] = b.times[env] + b.dt
    if env == 0:
        b.step_num_unstable_out[0] = 0


@wp.kernel
def _record_step(sim: SimState, b: EpisodeBuffers):
    """Launch dim ``N``: the worlds the simulator flagged unstable this step (flag and count) and the tracking
    errors summed over envs (atomic adds: the sums are logging figures).

    # Data in: sim.unstable, b.errors
    # Data out: b.step_unstable_out, b.step_num_unstable_out, b.error_sum_out (accumulated)
    """
    env = wp.tid()
    unstable = sim.unstable[env] != 0
    b.step_unstable_out[env] = unstable
    if unstable:
        wp.atomic_add(b.step_num_unstable_out, 0, 1)
    for e in range(b.errors.shape[1]):
        wp.atomic_add(b.error_sum_out, e, b.errors[env, e])


@wp.kernel
def _close_episodes(b: EpisodeBuffers):
    """Launch dim ``N``: ``done = terminated or truncated``; each env's row of ``done_stats`` (its episode sums,
    length and one-hot end cause, read by the agent where done); the ended envs' length and sums restart at 0
    and they become the reset mask.

    # Data in: b.terminated, b.truncated, b.term_cause, b.cause_codes
    # Data out: b.done_out, b.reset_mask_out, b.done_stats_out; b.episode_length, b.episode_sums (ended envs)
    """
    env = wp.tid()
    done = b.terminated[env] or b.truncated[env]
    b.done_out[env] = done
    b.reset_mask_out[env] = done
    nsums = b.episode_sums.shape[1]
    for k in range(nsums):
        b.done_stats_out[env, k] = b.episode_sums[env, k]
        if done:
            b.episode_sums[env, k] = 0.0
    b.done_stats_out[env, nsums] = wp.float32(b.episode_length[env])
    for c in range(b.cause_codes.shape[0]):
        hit = wp.float32(0.0)
        if b.term_cause[env] == b.cause_codes[c]:
            hit = 1.0
        b.done_stats_out[env, nsums + 1 + c] = hit
    if done:
        b.episode_length[env] = 0


@wp.kernel
def _copy_rows(src: wp.array2d(dtype=wp.float32), dst_out: wp.array2d(dtype=wp.float32)):
    """Launch dim ``(N, D)``: ``dst_out = src``."""
    env, col = wp.tid()
    dst_out[env, col] = src[env, col]


def advance_clock(b: EpisodeBuffers) -> None:
    """Episode lengths + 1 and reference times + dt of every env (before the reference is queried)."""
    wp.launch(_advance_clock, dim=b.times.shape[0], inputs=[b], device=b.times.device)


def record_step(sim: SimState, b: EpisodeBuffers) -> None:
    """Unstable worlds of this step and the error sums (after rewards and terminations)."""
    wp.launch(_record_step, dim=b.times.shape[0], inputs=[sim, b], device=b.times.device)


def close_episodes(b: EpisodeBuffers) -> None:
    """Done flags, the ended episodes' statistics, the reset mask (after the step's observations)."""
    wp.launch(_close_episodes, dim=b.times.shape[0], inputs=[b], device=b.times.device)


def copy_rows(src: wp.array, dst_out: wp.array) -> None:
    """``dst_out [N, D] = src [N, D]`` (the terminal observations), as a kernel so it can sit in a graph."""
    if src.shape[1] > 0:
        wp.launch(_copy_rows, dim=src.shape, inputs=[src], outputs=[dst_out], device=src.device)
