"""Start-state sampling of the imitation env on the device: a failure EMA over (motion, time) bins and
inverse-CDF draws of new start states for the envs that reset.

Bins: each motion is cut into ``bin_size`` seconds; bin ``b`` belongs to motion ``bin_motion[b]`` and covers
``[bin_index[b] * bin_size, min(+bin_size, length))``. The EMA of the per-step failure count of each bin is kept
divided by a decay scale ``S_t = (1 - alpha)^t`` (float64, on the device), so a step writes only the bins of the
envs that terminated: ``stored += alpha * f_t / S_t``, ``ema = stored * S``. The sampling distribution

    p[b] ∝ sum_k kernel[k] * ema[ahead[k, b]] + uniform_ratio * uniform[b]

is BeyondMimic's rule for one clip. Over a motion library it lets the clips that fail most take every start
(the clips already tracked get none, and are forgotten), so the shares of the motions are balanced:

    P[b] = (1 - motion_floor) * p[b] / sum(p) + motion_floor * w[m] * p[b] / sum(p over the bins of m)

(``m`` the motion of ``b``, ``w`` the motion weights normalised): a share ``motion_floor`` of the starts is spread
over the motions by their weights, each drawn over its own bins by the rule above. With ``split_by_rate`` the rest
is split over the motions by their failure rates instead of their failure counts (a count grows with the envs a
motion already holds, so the motion that fails most takes that whole share; a rate does not):

    P[b] = ((1 - motion_floor) * r[m] / sum(r) + motion_floor * w[m]) * p[b] / sum(p over the bins of m)

with ``r[m]`` the EMA of the motion's failures over the EMA of its env-steps (``w`` while no motion has failed).
``P`` is folded into a float64 CDF every ``refresh_every`` steps (every step for small sets) by a chunked scan,
and the scale is folded into ``stored`` at a refresh once it falls below ``1e-20``. Every stage is a plain kernel
whose decisions are read from device buffers, so the whole sequence can be captured in a graph.

Entry points: :func:`count_failures` (per step, before the refresh), :func:`refresh` (the CDF),
:func:`draw_starts` (per step, the envs in a mask).
"""

import warp as wp

CHUNK = 256  # bins scanned by one thread of the refresh
FOLD_BELOW = 1.0e-20  # the decay scale is folded into the stored EMA below this (float32 stays in range)


@wp.struct
class SamplerTables:
    """Constants. Per motion ``[M]``: ``bin_offset`` (first bin), ``motion_num_bins``, ``motion_lengths`` (s),
    ``motion_frame_dt`` (s; 0: start times are not snapped to stored frames), ``motion_weights`` (summing to 1).
    Per bin ``[B]``: ``bin_motion``,
    ``bin_index`` (the bin's number inside its motion), ``uniform_probs`` (each motion's weight spread over its
    bins, summing to 1). Smoothing: ``ahead [K, B]`` the bins whose failures bin ``b`` is credited with and
    ``kernel [K]`` their weights. Scalars: ``bin_size`` (s), ``ema_alpha``, ``uniform_ratio``, ``motion_floor``,
    ``split_by_rate`` (1: the failure-driven share is split over the motions by failure rate, 0: by count),
    ``init_start_prob``, ``refresh_every`` (steps), ``enabled`` (0: uniform, no EMA)."""

    bin_offset: wp.array(dtype=wp.int32)
    motion_num_bins: wp.array(dtype=wp.int32)
    motion_lengths: wp.array(dtype=wp.float32)
    motion_frame_dt: wp.array(dtype=wp.float32)
    motion_weights: wp.array(dtype=wp.float32)
    bin_motion: wp.array(dtype=wp.int32)
    bin_index: wp.array(dtype=wp.int32)
    uniform_probs: wp.array(dtype=wp.float32)
    ahead: wp.array2d(dtype=wp.int32)
    kernel: wp.array(dtype=wp.float32)
    bin_size: float
    ema_alpha: float
    uniform_ratio: float
    motion_floor: float
    split_by_rate: int
    init_start_prob: float
    refresh_every: int
    enabled: int


@wp.struct
class SamplerState:
    """``stored_ema [B]`` the failure EMA divided by ``scale [1]`` (float64); ``stored_visits [M]`` the EMA of each
    motion's env-steps, divided by the same scale (counted with ``split_by_rate`` only); ``steps [1]`` updates since
    the last refresh; ``cdf [B]`` (float64) the cumulative sampling weights; scratch of the refresh (float64):
    ``weight [B]`` the rule's weight of each bin, ``motion_own [M]`` the sum over the motion's bins,
    ``motion_rate [M]`` its failure rate, ``motion_factor [M]`` its balancing factor, ``chunk_sum [C]``,
    ``total [1]`` and ``rate_total [1]``; ``rng [N]`` each env's random state."""

    stored_ema: wp.array(dtype=wp.float32)
    stored_visits: wp.array(dtype=wp.float32)
    scale: wp.array(dtype=wp.float64)
    steps: wp.array(dtype=wp.int32)
    cdf: wp.array(dtype=wp.float64)
    weight: wp.array(dtype=wp.float64)
    motion_own: wp.array(dtype=wp.float64)
    motion_rate: wp.array(dtype=wp.float64)
    motion_factor: wp.array(dtype=wp.float64)
    chunk_sum: wp.array(dtype=wp.float64)
    total: wp.array(dtype=wp.float64)
    rate_total: wp.array(dtype=wp.float64)
    rng: wp.array(dtype=wp.uint32)


@wp.func
def bin_of(t: SamplerTables, motion: wp.int32, time: wp.float32) -> wp.int32:
    """Flat bin of ``(motion, time)``; times before 0 fall in the first bin, past the end in the last."""
    local = wp.int32(0)
    if time > 0.0:
        local = wp.int32(time / t.bin_size)
    local = wp.min(local, t.motion_num_bins[motion] - 1)
    return t.bin_offset[motion] + local


@wp.kernel
def _advance_scale(t: SamplerTables, s: SamplerState):
    """Launch dim 1: one step of the EMA's decay, ``scale *= 1 - alpha``; counts the step.

    # Data in: t.ema_alpha
    # Data out: s.scale, s.steps (read-modify-write)
    """
    s.scale[0] = s.scale[0] * (wp.float64(1.0) - wp.float64(t.ema_alpha))
    s.steps[0] = s.steps[0] + 1


@wp.kernel
def _count_failures(t: SamplerTables, motion_ids: wp.array(dtype=wp.int32), times: wp.array(dtype=wp.float32),
                    terminated: wp.array(dtype=wp.bool), s: SamplerState):
    """Launch dim ``N``: each env that terminated adds ``alpha / scale`` to the stored EMA of its bin; with
    ``split_by_rate`` every env adds the same to its motion's visits.

    # Data in: t (bins, ema_alpha, split_by_rate), motion_ids, times, terminated, s.scale
    # Data out: s.stored_ema, s.stored_visits (atomic adds)
    """
    env = wp.tid()
    step = wp.float32(wp.float64(t.ema_alpha) / s.scale[0])
    if t.split_by_rate != 0:
        wp.atomic_add(s.stored_visits, motion_ids[env], step)
    if not terminated[env]:
        return
    b = bin_of(t, motion_ids[env], times[env])
    wp.atomic_add(s.stored_ema, b, step)


@wp.func
def refresh_due(t: SamplerTables, s: SamplerState, force: int) -> bool:
    return force != 0 or s.steps[0] >= t.refresh_every


@wp.kernel
def _bin_weights(t: SamplerTables, force: int, s: SamplerState):
    """Launch dim ``C = ceil(B / CHUNK)``: the rule's weight of each bin of the chunk (smoothed failures plus the
    uniform floor) into ``s.weight`` and the chunk's total into ``s.chunk_sum`` (nothing when no refresh is due).

    # Data in: t (uniform_probs, ahead, kernel, uniform_ratio, enabled, refresh_every), s.stored_ema, s.scale,
    #          s.steps, force
    # Data out: s.weight, s.chunk_sum
    """
    c = wp.tid()
    if not refresh_due(t, s, force):
        return
    nbins = s.cdf.shape[0]
    scale = s.scale[0]
    total = wp.float64(0.0)
    for b in range(c * CHUNK, wp.min((c + 1) * CHUNK, nbins)):
        w = wp.float64(t.uniform_probs[b])
        if t.enabled != 0:
            smoothed = wp.float64(0.0)
            for k in range(t.kernel.shape[0]):
                smoothed += wp.float64(t.kernel[k]) * wp.float64(s.stored_ema[t.ahead[k, b]]) * scale
            w = smoothed + wp.float64(t.uniform_ratio) * w
        s.weight[b] = w
        total += w
    s.chunk_sum[c] = total


@wp.kernel
def _sum(t: SamplerTables, force: int, s: SamplerState, values: wp.array(dtype=wp.float64),
         total_out: wp.array(dtype=wp.float64)):
    """Launch dim 1: ``total_out[0] = sum(values)`` (the chunks' totals, the motions' failure rates).

    # Data in: values, s.steps, force
    # Data out: total_out
    """
    if not refresh_due(t, s, force):
        return
    total = wp.float64(0.0)
    for i in range(values.shape[0]):
        total += values[i]
    total_out[0] = total


@wp.kernel
def _motion_sums(t: SamplerTables, force: int, s: SamplerState):
    """Launch dim ``M``: the sum of the rule's weights over the motion's bins and, with ``split_by_rate``, the
    motion's failure rate (its failure EMA over its visit EMA; 0 before its first visit).

    # Data in: t (bin_offset, motion_num_bins, split_by_rate), s.weight, s.stored_ema, s.stored_visits, s.steps,
    #          force
    # Data out: s.motion_own, s.motion_rate
    """
    m = wp.tid()
    if not refresh_due(t, s, force):
        return
    first = t.bin_offset[m]
    own = wp.float64(0.0)
    failures = wp.float64(0.0)
    for b in range(first, first + t.motion_num_bins[m]):
        own += s.weight[b]
        failures += wp.float64(s.stored_ema[b])
    s.motion_own[m] = own
    rate = wp.float64(0.0)
    visits = wp.float64(s.stored_visits[m])
    if t.split_by_rate != 0 and visits > wp.float64(0.0):
        rate = failures / visits  # the decay scale divides both
    s.motion_rate[m] = rate


@wp.kernel
def _motion_factors(t: SamplerTables, force: int, s: SamplerState):
    """Launch dim ``M``: the factor on the weights of the motion's bins: ``(1 - floor) / total + floor * w[m] /
    own[m]`` (by count), or ``((1 - floor) * r[m] / sum(r) + floor * w[m]) / own[m]`` (by rate; ``w[m]`` in place of
    ``r[m] / sum(r)`` while no motion has failed); folds the decay scale into the visits when it is folded.

    # Data in: t (motion_weights, motion_floor, split_by_rate), s.motion_own, s.motion_rate, s.rate_total, s.total,
    #          s.scale, s.steps, force
    # Data out: s.motion_factor, s.stored_visits (when folding)
    """
    m = wp.tid()
    if not refresh_due(t, s, force):
        return
    own = s.motion_own[m]
    floor = wp.float64(t.motion_floor)
    w = wp.float64(t.motion_weights[m])
    factor = wp.float64(0.0)
    if t.split_by_rate != 0:
        share = w
        if s.rate_total[0] > wp.float64(0.0):
            share = s.motion_rate[m] / s.rate_total[0]
        if own > wp.float64(0.0):
            factor = ((wp.float64(1.0) - floor) * share + floor * w) / own
    else:
        factor = (wp.float64(1.0) - floor) / s.total[0]
        if own > wp.float64(0.0):
            factor += floor * w / own
    s.motion_factor[m] = factor
    if s.scale[0] < wp.float64(FOLD_BELOW):
        s.stored_visits[m] = wp.float32(wp.float64(s.stored_visits[m]) * s.scale[0])


@wp.kernel
def _scan_chunks(t: SamplerTables, force: int, s: SamplerState):
    """Launch dim ``C``: the balanced weight of each bin of the chunk, its running sum within the chunk into
    ``s.cdf`` and the chunk's total into ``s.chunk_sum``.

    # Data in: t.bin_motion, s.weight, s.motion_factor, s.steps, force
    # Data out: s.cdf (chunk-local sums), s.chunk_sum
    """
    c = wp.tid()
    if not refresh_due(t, s, force):
        return
    nbins = s.cdf.shape[0]
    total = wp.float64(0.0)
    for b in range(c * CHUNK, wp.min((c + 1) * CHUNK, nbins)):
        total += s.weight[b] * s.motion_factor[t.bin_motion[b]]
        s.cdf[b] = total
    s.chunk_sum[c] = total


@wp.kernel
def _chunk_offsets(t: SamplerTables, force: int, s: SamplerState):
    """Launch dim 1: ``s.chunk_sum`` becomes the exclusive prefix sum of the chunks' totals.

    # Data in: s.chunk_sum, s.steps, force
    # Data out: s.chunk_sum
    """
    if not refresh_due(t, s, force):
        return
    running = wp.float64(0.0)
    for c in range(s.chunk_sum.shape[0]):
        total = s.chunk_sum[c]
        s.chunk_sum[c] = running
        running += total


@wp.kernel
def _finish_chunks(t: SamplerTables, force: int, s: SamplerState):
    """Launch dim ``C``: adds each chunk's offset to its CDF entries and, when the scale is folded at this
    refresh, multiplies the chunk's stored EMA by it.

    # Data in: s.chunk_sum, s.scale, s.steps, force
    # Data out: s.cdf, s.stored_ema (when folding)
    """
    c = wp.tid()
    if not refresh_due(t, s, force):
        return
    nbins = s.cdf.shape[0]
    offset = s.chunk_sum[c]
    fold = s.scale[0] < wp.float64(FOLD_BELOW)
    for b in range(c * CHUNK, wp.min((c + 1) * CHUNK, nbins)):
        s.cdf[b] = s.cdf[b] + offset
        if fold:
            s.stored_ema[b] = wp.float32(wp.float64(s.stored_ema[b]) * s.scale[0])


@wp.kernel
def _close_refresh(t: SamplerTables, force: int, s: SamplerState):
    """Launch dim 1: after a refresh, the step count restarts and a folded scale becomes 1.

    # Data in: s.scale, s.steps, force
    # Data out: s.scale, s.steps
    """
    if not refresh_due(t, s, force):
        return
    if s.scale[0] < wp.float64(FOLD_BELOW):
        s.scale[0] = wp.float64(1.0)
    s.steps[0] = 0


@wp.kernel
def _draw_starts(t: SamplerTables, mask: wp.array(dtype=wp.bool), s: SamplerState,
                 motion_ids_out: wp.array(dtype=wp.int32), times_out: wp.array(dtype=wp.float32)):
    """Launch dim ``N``: for each env in ``mask``, a bin by inverse CDF, a start time uniform inside it (snapped
    down to a stored frame, strictly inside the clip), or t = 0 with probability ``t.init_start_prob``. Three
    draws from the env's own random state, in that order: time in bin, t = 0 or not, bin.

    # Data in: t, mask, s.cdf, s.rng
    # Data out: motion_ids_out, times_out (masked envs), s.rng (masked envs)
    """
    env = wp.tid()
    if not mask[env]:
        return
    state = s.rng[env]
    u_time = wp.randf(state)
    u_zero = wp.randf(state)
    u_bin = wp.randf(state)
    s.rng[env] = state
    nbins = s.cdf.shape[0]
    x = wp.float64(u_bin) * s.cdf[nbins - 1]
    lo = int(0)
    hi = nbins - 1
    while lo < hi:  # the first bin whose cumulative weight exceeds x
        mid = (lo + hi) // 2
        if s.cdf[mid] > x:
            hi = mid
        else:
            lo = mid + 1
    motion = t.bin_motion[lo]
    length = t.motion_lengths[motion]
    start = wp.float32(t.bin_index[lo]) * t.bin_size
    end = wp.min(start + t.bin_size, length)
    time = start + u_time * (end - start)
    dt = t.motion_frame_dt[motion]
    if dt > 0.0:
        time = wp.floor(time / dt) * dt
    time = wp.min(time, wp.max(length - 1.0e-4, 0.0))  # float rounding must not reach the clip's end
    if u_zero < t.init_start_prob:
        time = 0.0
    motion_ids_out[env] = motion
    times_out[env] = time


# ------------------------------------------------------------------ entry points
def count_failures(t: SamplerTables, s: SamplerState, motion_ids: wp.array, times: wp.array,
                   terminated: wp.array) -> None:
    """One step of the failure EMA: decay, then the terminations ``[N]`` at ``(motion_ids, times)`` added to their
    bins (and, with ``split_by_rate``, every env's step to its motion's visits). Reads ``t``, the inputs,
    ``s.scale``; writes ``s.scale``, ``s.steps``, ``s.stored_ema``, ``s.stored_visits``."""
    device = s.cdf.device
    wp.launch(_advance_scale, dim=1, inputs=[t, s], device=device)
    wp.launch(_count_failures, dim=terminated.shape[0], inputs=[t, motion_ids, times, terminated, s], device=device)


def refresh(t: SamplerTables, s: SamplerState, force: bool = False) -> None:
    """Recompute ``s.cdf`` from the EMA when ``refresh_every`` steps have passed since the last refresh (or
    ``force``); folds the decay scale when it is small. Reads ``t``, ``s.stored_ema``, ``s.stored_visits``,
    ``s.scale``, ``s.steps``; writes ``s.cdf``, the scratch (``s.weight``, ``s.motion_own``, ``s.motion_rate``,
    ``s.motion_factor``, ``s.chunk_sum``, ``s.total``, ``s.rate_total``), and at a fold ``s.stored_ema``,
    ``s.stored_visits`` and ``s.scale``."""
    device, chunks = s.cdf.device, s.chunk_sum.shape[0]
    f = int(force)
    wp.launch(_bin_weights, dim=chunks, inputs=[t, f, s], device=device)
    wp.launch(_sum, dim=1, inputs=[t, f, s, s.chunk_sum], outputs=[s.total], device=device)
    motions = s.motion_factor.shape[0]
    wp.launch(_motion_sums, dim=motions, inputs=[t, f, s], device=device)
    wp.launch(_sum, dim=1, inputs=[t, f, s, s.motion_rate], outputs=[s.rate_total], device=device)
    wp.launch(_motion_factors, dim=motions, inputs=[t, f, s], device=device)
    wp.launch(_scan_chunks, dim=chunks, inputs=[t, f, s], device=device)
    wp.launch(_chunk_offsets, dim=1, inputs=[t, f, s], device=device)
    wp.launch(_finish_chunks, dim=chunks, inputs=[t, f, s], device=device)
    wp.launch(_close_refresh, dim=1, inputs=[t, f, s], device=device)


def draw_starts(t: SamplerTables, s: SamplerState, mask: wp.array, motion_ids_out: wp.array,
                times_out: wp.array) -> None:
    """New ``(motion, time)`` for the envs in ``mask [N]`` from the last refreshed CDF; other envs untouched.
    Reads ``t``, ``mask``, ``s.cdf``, ``s.rng``; writes ``motion_ids_out``, ``times_out``, ``s.rng``."""
    wp.launch(_draw_starts, dim=mask.shape[0], inputs=[t, mask, s], outputs=[motion_ids_out, times_out],
              device=s.cdf.device)


def num_chunks(num_bins: int) -> int:
    return (num_bins + CHUNK - 1) // CHUNK
