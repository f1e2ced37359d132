"""The termination curriculum of the imitation env: one factor on the distance thresholds of the terminations
(anchor height, end-effector height, global body distance) that starts wide and tightens as the policy survives.

Each control step the envs that terminated are counted, the per-env termination rate is folded into an EMA, and
the factor moves by one relative ``step``: down (tighter, to ``lo``) while an env survives on average more than
``survive_steps`` control steps between terminations (``ema * survive_steps < 1``), up (wider, to ``hi``)
otherwise. ASAP's termination curriculum, driven by the termination rate instead of the episode length, so that
episodes cut by the clip's end do not count as failures. Device state only: no host read, capturable in the env's
step graph.

Entry point: :func:`update_termination_scale` (after the terminations of the step).
"""

import warp as wp


@wp.struct
class TerminationCurriculum:
    """``terminated [N]`` (bool, in); ``count [1]`` (float32 scratch: terminations this step), ``rate_ema [1]``
    (EMA of the fraction of envs that terminate per step), ``scale [1]`` (the factor the termination kernel
    reads): state, read-modify-write. ``alpha`` the EMA's weight of this step, ``step`` the relative change of
    ``scale`` per control step, ``survive_steps`` the mean control steps between two terminations of an env
    above which ``scale`` tightens, ``lo`` / ``hi`` its bounds."""

    terminated: wp.array(dtype=wp.bool)
    count: wp.array(dtype=wp.float32)
    rate_ema: wp.array(dtype=wp.float32)
    scale: wp.array(dtype=wp.float32)
    alpha: float
    step: float
    survive_steps: float
    lo: float
    hi: float


@wp.kernel
def _count_terminations(c: TerminationCurriculum):
    """Launch dim ``N``: ``count += 1`` for every env that terminated this step.

    # Data in: c.terminated
    # Data out: c.count (accumulated)
    """
    env = wp.tid()
    if c.terminated[env]:
        wp.atomic_add(c.count, 0, 1.0)


@wp.kernel
def _update_scale(c: TerminationCurriculum):
    """Launch dim ``1``: the rate EMA takes this step's termination fraction, the factor moves one step (tighter
    while envs survive ``survive_steps`` on average, wider otherwise, within ``[lo, hi]``), the count restarts.

    # Data in: c.count, c.terminated (its length N)
    # Data out: c.rate_ema, c.scale (read-modify-write), c.count (zeroed)
    """
    rate = c.count[0] / wp.float32(c.terminated.shape[0])
    ema = c.rate_ema[0] + c.alpha * (rate - c.rate_ema[0])
    c.rate_ema[0] = ema
    if ema * c.survive_steps < 1.0:
        c.scale[0] = wp.max(c.lo, c.scale[0] * (1.0 - c.step))
    else:
        c.scale[0] = wp.min(c.hi, c.scale[0] * (1.0 + c.step))
    c.count[0] = 0.0


def update_termination_scale(c: TerminationCurriculum) -> None:
    """One control step of the curriculum: ``c.rate_ema`` and ``c.scale`` from this step's ``c.terminated``."""
    wp.launch(_count_terminations, dim=c.terminated.shape[0], inputs=[c], device=c.scale.device)
    wp.launch(_update_scale, dim=1, inputs=[c], device=c.scale.device)
