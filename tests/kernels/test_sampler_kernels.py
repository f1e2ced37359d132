"""The start-state sampler's kernels against NumPy (float64): the chunked CDF scan, the lazily decayed EMA and its
fold, and the inverse-CDF draws (a chi-square test against the distribution they target)."""

import math

import numpy as np
import pytest
import torch

from simppo.envs.imitation.sampler import AdaptiveSampler, AdaptiveSamplingCfg
from simppo.kernels.imitation.sampler import CHUNK


def _sampler(lengths, weights, num_envs=1, **cfg) -> AdaptiveSampler:
    c = AdaptiveSamplingCfg(**cfg)
    return AdaptiveSampler(lengths, torch.tensor(weights, dtype=torch.float32), c, 0.0, "cpu", num_envs=num_envs,
                           seed=3)


def _reference_probabilities(s: AdaptiveSampler, ema: np.ndarray, visits: np.ndarray | None = None) -> np.ndarray:
    """p[b] ∝ sum_k kernel[k] ema[ahead[k, b]] + uniform_ratio * uniform[b]; then a share motion_floor of the mass
    moved to each motion in proportion to its weight, spread over its bins as p is: in float64, motion by motion.
    With ``visits [M]`` (the split by rate) the rest goes to each motion by its failures over its visits."""
    kernel, ahead = s.kernel.double().numpy(), s.ahead.long().numpy()
    smoothed = (kernel[:, None] * ema[ahead]).sum(0)
    p = smoothed + float(np.float32(s.cfg.uniform_ratio)) * s.uniform_probs.double().numpy()  # a float32 parameter
    p = p / p.sum()
    weights = s.motion_weights.double().numpy()
    out = np.empty_like(p)
    spans = list(zip(s.bin_offset.tolist(), s.motion_num_bins.tolist(), strict=True))
    if visits is not None:
        failures = np.array([ema[first:first + n].sum() for first, n in spans])
        rates = np.divide(failures, visits, out=np.zeros_like(failures), where=visits > 0)
        share = rates / rates.sum() if rates.sum() > 0 else weights
    for m, (first, n) in enumerate(spans):
        own = p[first:first + n]
        rest = (1 - s.cfg.motion_floor) * (own if visits is None else share[m] * own / own.sum())
        out[first:first + n] = rest + s.cfg.motion_floor * weights[m] * own / own.sum()
    return out / out.sum()  # the float32 weights sum to 1 only within rounding


def _chi2_bound(df: int, z: float = 3.09) -> float:
    """Wilson-Hilferty: the chi-square quantile of ``df`` degrees of freedom at the normal quantile ``z``
    (3.09: p = 0.999)."""
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def test_chunked_scan_is_the_float64_cumulative_sum():
    rng = np.random.default_rng(0)
    lengths = list(rng.uniform(0.3, 9.0, size=300))  # > 4 chunks of bins, motions across chunk borders
    s = _sampler(lengths, list(rng.uniform(0.5, 2.0, size=300)), smoothing_kernel_size=3)
    assert s.num_bins > 4 * CHUNK
    ema = rng.exponential(size=s.num_bins).astype(np.float32) * (rng.uniform(size=s.num_bins) < 0.2)
    s.failure_ema.copy_(torch.from_numpy(ema))
    s.refresh()
    p = _reference_probabilities(s, ema.astype(np.float64))
    cdf = s.cdf.numpy()
    np.testing.assert_allclose(cdf / cdf[-1], np.cumsum(p), rtol=1e-9, atol=1e-15)  # float32 inputs, float64 sums


def test_failure_ema_decays_lazily_and_folds_the_scale():
    s = _sampler([2.5, 1.0, 3.0], [1.0, 2.0, 1.0], ema_alpha=0.5, smoothing_kernel_size=1)
    rng = np.random.default_rng(1)
    ref = np.zeros(s.num_bins)
    folded = False
    for _ in range(90):  # 0.5^t passes 1e-20 at t = 67: the scale is folded into the stored EMA there
        ids = rng.integers(0, 3, size=16).astype(np.int32)
        times = rng.uniform(-0.2, 3.2, size=16).astype(np.float32)
        term = rng.uniform(size=16) < 0.4
        s.update(torch.from_numpy(ids), torch.from_numpy(times), torch.from_numpy(term))
        counts = np.zeros(s.num_bins)
        np.add.at(counts, s.bins_of(torch.from_numpy(ids), torch.from_numpy(times)).numpy(), term)
        ref = 0.5 * ref + 0.5 * counts
        folded |= float(s.scale) == 1.0
        assert float(s.scale) >= 1e-20 * 0.5
    assert folded
    np.testing.assert_allclose(s.ema().double().numpy(), ref, rtol=2e-6, atol=1e-30)
    np.testing.assert_allclose(np.diff(s.cdf.numpy(), prepend=0.0) / s.cdf.numpy()[-1],
                               _reference_probabilities(s, ref), rtol=1e-5, atol=1e-12)


def test_motion_floor_keeps_each_motion_its_share_of_the_starts():
    """Failures in one motion take nearly every start under the single-clip rule; with a floor every motion keeps
    at least ``floor * weight`` of them, spread over its own bins as the rule spreads them."""
    lengths, weights = [3.0, 2.0, 4.0], [1.0, 1.0, 2.0]
    ema = np.zeros(9, np.float32)
    ema[[1, 2]] = [3.0, 1.0]  # a hard clip: motion 0 fails often, the others never
    shares = {}
    for floor in (0.0, 0.5, 1.0):
        s = _sampler(lengths, weights, motion_floor=floor, smoothing_kernel_size=1)
        s.failure_ema.copy_(torch.from_numpy(ema))
        s.refresh()
        p = s.probabilities().double().numpy()
        np.testing.assert_allclose(np.diff(s.cdf.numpy(), prepend=0.0) / s.cdf.numpy()[-1], p, rtol=1e-6)
        shares[floor] = np.array([p[0:3].sum(), p[3:5].sum(), p[5:9].sum()])
        # inside a motion the bins keep the rule's proportions (motion 0: weight 1/4 spread over 3 bins)
        rule = ema[0:3] + 0.1 * 0.25 / 3
        np.testing.assert_allclose(p[0:3] / p[0:3].sum(), rule / rule.sum(), rtol=1e-5)
    assert shares[0.0][1] + shares[0.0][2] < 0.03  # the rule alone: the tracked clips are starved
    np.testing.assert_allclose(shares[1.0], [0.25, 0.25, 0.5], rtol=1e-6)  # all by weight
    assert (shares[0.5] >= 0.5 * np.array([0.25, 0.25, 0.5]) - 1e-9).all()
    np.testing.assert_allclose(shares[0.5], 0.5 * shares[0.0] + 0.5 * shares[1.0], rtol=1e-6)
    with pytest.raises(ValueError, match="motion_floor"):
        AdaptiveSamplingCfg(motion_floor=1.5)


def test_split_by_rate_counts_visits_and_shares_by_failures_per_step():
    """By count, a long clip failing as often per step as a short one takes the failure-driven share in proportion
    to the envs it holds; by rate the two take it equally. Visits and failures are folded by the same lazy EMA."""
    lengths, weights = [30.0, 3.0, 4.0], [1.0, 1.0, 1.0]
    s = _sampler(lengths, weights, num_envs=64, motion_split="rate", ema_alpha=0.5, smoothing_kernel_size=2)
    rng = np.random.default_rng(4)
    ref_ema, ref_visits = np.zeros(s.num_bins), np.zeros(3)
    for _ in range(80):  # past the fold of the scale (step 67)
        ids = rng.choice(3, size=64, p=[0.8, 0.15, 0.05]).astype(np.int32)  # the long clip holds most envs
        times = (rng.uniform(size=64) * np.asarray(lengths)[ids]).astype(np.float32)
        term = rng.uniform(size=64) < np.array([0.1, 0.1, 0.0])[ids]  # motions 0 and 1 fail at the same rate
        s.update(torch.from_numpy(ids), torch.from_numpy(times), torch.from_numpy(term))
        counts = np.zeros(s.num_bins)
        np.add.at(counts, s.bins_of(torch.from_numpy(ids), torch.from_numpy(times)).numpy(), term)
        ref_ema = 0.5 * ref_ema + 0.5 * counts
        ref_visits = 0.5 * ref_visits + 0.5 * np.bincount(ids, minlength=3)
    np.testing.assert_allclose(s.visits().double().numpy(), ref_visits, rtol=2e-6)
    np.testing.assert_allclose(s.ema().double().numpy(), ref_ema, rtol=2e-6, atol=1e-30)
    p = _reference_probabilities(s, ref_ema, ref_visits)
    np.testing.assert_allclose(np.diff(s.cdf.numpy(), prepend=0.0) / s.cdf.numpy()[-1], p, rtol=1e-5, atol=1e-12)
    np.testing.assert_allclose(s.probabilities().double().numpy(), p, rtol=1e-5, atol=1e-9)

    # hand-set: equal rates, a 10:1 count; the motion that never fails keeps its floor share only
    s.failure_ema.zero_()
    s.failure_ema[0:30] = 1.0 / 30  # 1 failure per step among the 100 envs of the long clip
    s.failure_ema[30:33] = 0.1 / 3  # 0.1 among the 10 of the short one: the same rate
    s.motion_visits.copy_(torch.tensor([100.0, 10.0, 10.0]))
    s.scale.fill_(1.0)
    s.refresh()
    shares = s.motion_shares().double().numpy()
    np.testing.assert_allclose(shares, [0.25 + 0.5 / 3, 0.25 + 0.5 / 3, 0.5 / 3], rtol=1e-5)
    count = _sampler(lengths, weights, smoothing_kernel_size=2)
    count.failure_ema.copy_(s.failure_ema)
    count.refresh()
    assert count.motion_shares()[0] > 0.55  # by count the long clip takes most of the failure-driven half
    # the state round-trips (and a state saved by count, without visits, loads with visits at zero)
    again = _sampler(lengths, weights, num_envs=64, motion_split="rate", ema_alpha=0.5, smoothing_kernel_size=2)
    again.load_state_dict(s.state_dict())
    torch.testing.assert_close(again.cdf, s.cdf)
    again.load_state_dict(count.state_dict())
    assert not again.visits().any()
    with pytest.raises(ValueError, match="motion_split"):
        AdaptiveSamplingCfg(motion_split="share")


def test_draws_pass_a_chi_square_test_against_their_distribution():
    lengths = [2.5, 1.0, 3.0, 0.4, 5.2]
    n = 100_000
    s = _sampler(lengths, [1.0, 2.0, 1.0, 0.5, 1.0], num_envs=n)
    ema = np.zeros(s.num_bins, np.float32)
    ema[[1, 4, 9]] = [0.02, 0.5, 0.1]  # failures dominate three bins, the uniform floor keeps the rest
    s.failure_ema.copy_(torch.from_numpy(ema))
    s.refresh()
    p = _reference_probabilities(s, ema.astype(np.float64))
    ids, times = torch.zeros(n, dtype=torch.int32), torch.zeros(n)
    s.sample(torch.ones(n, dtype=torch.bool), ids, times)
    observed = np.bincount(s.bins_of(ids, times).numpy(), minlength=s.num_bins)
    expected = n * p
    assert expected.min() > 20  # the test's own validity: every cell well populated
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    assert chi2 < _chi2_bound(s.num_bins - 1), (chi2, observed, expected.round())
    # inside each bin the start time is uniform: the mean offset of each bin's draws is half its width
    b = s.bins_of(ids, times).numpy()
    start = s.bin_index.numpy()[b] * s.cfg.bin_size_s
    width = np.minimum(start + 1.0, np.asarray(lengths)[ids.numpy()]) - start
    u = (times.numpy() - start) / width
    assert ((u >= 0) & (u < 1)).all()
    assert abs(u.mean() - 0.5) < 0.01


def test_draws_touch_only_the_masked_envs_and_their_random_streams():
    n = 64
    s = _sampler([2.0, 3.0], [1.0, 1.0], num_envs=n)
    mask = torch.arange(n) % 3 == 0
    ids, times = torch.full((n,), 9, dtype=torch.int32), torch.full((n,), -1.0)
    rng_before = s.rng.clone()
    s.sample(mask, ids, times)
    assert (ids[~mask] == 9).all() and (times[~mask] == -1.0).all()
    assert ((ids[mask] >= 0) & (ids[mask] < 2)).all() and (times[mask] >= 0).all()
    assert torch.equal(s.rng[~mask], rng_before[~mask]) and (s.rng[mask] != rng_before[mask]).all()
    # the same seed gives the same draws
    again = _sampler([2.0, 3.0], [1.0, 1.0], num_envs=n)
    ids2, times2 = torch.full((n,), 9, dtype=torch.int32), torch.full((n,), -1.0)
    again.sample(mask, ids2, times2)
    assert torch.equal(ids, ids2) and torch.equal(times, times2)
