"""Adaptive σ of the tracking reward terms (PBHC / KungfuBot's adaptive motion tracking): each adapting term's σ²
follows the running mean, over the envs and the control steps, of the term's squared error, and never rises.

A fixed σ wide enough for the first iterations saturates once the policy tracks: at σ 0.3 m a body 3 cm off
earns exp(-0.01) = 0.99, so the reward barely tells a close pose from a closer one (a shallow squat from the
reference's deep one). With σ² the mean error, the typical env earns exp(-1) on the term and the gradient stays
where the errors are. σ starts at the configured value (the EMA starts at σ²) and is held at or above
``sigma_min``.

Each control step the squared errors of the stable envs are summed per term, the mean is folded into an EMA, and
σ = max(sigma_min, sqrt(min(σ², EMA))). One row of σ for every env, or one per motion (``env.adaptive_sigma.
per_motion``: each clip its own σ from its own envs' errors, so a clip the policy does not track yet keeps a wider
σ while the tracked ones sharpen). Nothing moves in the first ``start_steps`` control steps (counted on the device):
a wide σ pays the first, unbalanced steps of a walk, which a sharp anchor term does not. Device state only: no host
read, capturable in the env's step graph.

Entry point: :func:`adapt_sigmas` (after the rewards of the step, so the next step's rewards use the new σ).
"""

import warp as wp

from simppo.kernels.imitation.common import sigma_row


@wp.struct
class AdaptiveSigma:
    """``reward_raw [N, T]`` (in: each term's raw value, the squared error for tracking terms), ``unstable [N]``
    (int32, in: 1 = the world is skipped), ``motion_ids [N]`` (in: the motion each env played, its row with
    ``S = M`` rows); ``adapt [T]`` (int32: 1 = the term's σ adapts), ``sigma_min [T]`` (the floor); ``sums [S, T +
    1]`` (float32 scratch: the step's sums per row, the last column the count of stable envs), ``error_ema [S, T]``
    (state: EMA of the mean squared error), ``sigmas [S, T]`` (state, read-modify-write: the σ the reward kernel
    reads; ``S = 1``: one row for all), ``steps [1]`` (int32 state: control steps counted, up to ``start_steps``);
    ``alpha`` the EMA's weight of one control step, ``start_steps`` the control steps before anything adapts."""

    reward_raw: wp.array2d(dtype=wp.float32)
    unstable: wp.array(dtype=wp.int32)
    motion_ids: wp.array(dtype=wp.int32)
    adapt: wp.array(dtype=wp.int32)
    sigma_min: wp.array(dtype=wp.float32)
    sums: wp.array2d(dtype=wp.float32)
    error_ema: wp.array2d(dtype=wp.float32)
    sigmas: wp.array2d(dtype=wp.float32)
    steps: wp.array(dtype=wp.int32)
    alpha: float
    start_steps: int


@wp.kernel
def _sum_errors(a: AdaptiveSigma):
    """Launch dim ``N``: every stable env adds its adapting terms' squared errors to its row, and one to the row's
    count; none before ``start_steps`` control steps (so no row moves).

    # Data in: a.reward_raw, a.unstable, a.motion_ids, a.adapt, a.steps
    # Data out: a.sums (accumulated)
    """
    env = wp.tid()
    if a.unstable[env] != 0 or a.steps[0] < a.start_steps:
        return
    row = sigma_row(a.sigmas, a.motion_ids, env)
    for i in range(a.adapt.shape[0]):
        if a.adapt[i] != 0:
            wp.atomic_add(a.sums, row, i, a.reward_raw[env, i])
    wp.atomic_add(a.sums, row, a.adapt.shape[0], 1.0)


@wp.kernel
def _update_sigmas(a: AdaptiveSigma):
    """Launch dim ``S``: in each row, each adapting term's EMA takes the step's mean squared error and its σ falls
    to the EMA's root where that is lower (held at ``sigma_min``); the row's sums restart. A row with no stable env
    this step (a motion nobody played, or a step before ``start_steps``) moves nothing. Row 0 counts the step
    (up to ``start_steps``); no row reads the count here, so the order of the rows does not matter.

    # Data in: a.sums, a.adapt, a.sigma_min
    # Data out: a.error_ema, a.sigmas (read-modify-write), a.sums (zeroed), a.steps (row 0)
    """
    row = wp.tid()
    nt = a.adapt.shape[0]
    count = a.sums[row, nt]
    for i in range(nt):
        if a.adapt[i] != 0 and count > 0.0:
            ema = a.error_ema[row, i] + a.alpha * (a.sums[row, i] / count - a.error_ema[row, i])
            a.error_ema[row, i] = ema
            s = a.sigmas[row, i]
            a.sigmas[row, i] = wp.max(a.sigma_min[i], wp.sqrt(wp.min(s * s, ema)))
        a.sums[row, i] = 0.0
    a.sums[row, nt] = 0.0
    if row == 0 and a.steps[0] < a.start_steps:
        a.steps[0] = a.steps[0] + 1


def adapt_sigmas(a: AdaptiveSigma) -> None:
    """One control step: ``a.error_ema`` and ``a.sigmas`` from this step's ``a.reward_raw``."""
    wp.launch(_sum_errors, dim=a.reward_raw.shape[0], inputs=[a], device=a.sigmas.device)
    wp.launch(_update_sigmas, dim=a.sigmas.shape[0], inputs=[a], device=a.sigmas.device)
