"""MJWarp's per-world overflow bitmask (``Data.overflow``) read out and cleared after every control step.

mujoco_warp ORs :class:`mujoco_warp.OverflowType` bits into ``overflow[world]`` whenever a buffer (contacts,
constraint rows, ...) or a solver iteration cap overflows, and clears them only in ``reset_data``. This
stage turns the sticky bits into per-step ones and counts the worlds that overflowed a buffer.
"""

import warp as wp


@wp.struct
class OverflowBuffers:
    """``overflow [N]`` int32 (MJWarp's bitmask; read, then cleared), ``counted_bits`` (the bits that count as
    an overflow, e.g. every buffer bit but the solver iteration caps); outputs ``step_overflow_out [N]``
    int32 (this step's bits) and ``num_overflow_out [1]`` int32 (accumulated: worlds with a counted bit,
    summed over steps until the owner zeroes it)."""

    overflow: wp.array(dtype=wp.int32)
    counted_bits: wp.int32
    step_overflow_out: wp.array(dtype=wp.int32)
    num_overflow_out: wp.array(dtype=wp.int32)


@wp.kernel
def overflow_kernel(b: OverflowBuffers):
    """Launch dim ``N``.

    # Data in: b.overflow (MJWarp's per-world overflow bits), b.counted_bits
    # Data out: b.step_overflow_out, b.num_overflow_out[0] (added to); b.overflow cleared
    """
    w = wp.tid()
    bits = b.overflow[w]
    b.step_overflow_out[w] = bits
    b.overflow[w] = 0
    if (bits & b.counted_bits) != 0:
        wp.atomic_add(b.num_overflow_out, 0, 1)


def collect_overflow(b: OverflowBuffers) -> None:
    """``step_overflow_out`` = ``overflow``; ``overflow`` = 0; ``num_overflow_out[0]`` += worlds with a counted bit."""
    wp.launch(overflow_kernel, dim=b.overflow.shape[0], inputs=[b], device=b.overflow.device)
