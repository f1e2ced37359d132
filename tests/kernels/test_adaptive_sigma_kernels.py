"""The adaptive σ kernels against NumPy (float64): the per-term EMA of the mean squared error over the stable envs,
σ falling to its root and never rising, held at its floor, the terms that do not adapt left alone; with one row per
motion, each row from its own envs' errors; nothing moving before ``start_steps``."""

import numpy as np
import torch

from simppo.kernels.imitation.adaptive_sigma import AdaptiveSigma, adapt_sigmas
from simppo.utils.device import warp_view


def _bind(raw: torch.Tensor, unstable: torch.Tensor, motion_ids: torch.Tensor, adapt: list[int],
          sigma0: list[list[float]], floor: list[float], alpha: float, start_steps: int = 0):
    t = len(adapt)
    rows = len(sigma0)
    state = {"sigmas": torch.tensor(sigma0), "ema": torch.tensor(sigma0).square(), "sums": torch.zeros(rows, t + 1),
             "adapt": torch.tensor(adapt, dtype=torch.int32), "floor": torch.tensor(floor),
             "steps": torch.zeros(1, dtype=torch.int32)}
    a = AdaptiveSigma()
    a.reward_raw, a.unstable, a.motion_ids = warp_view(raw), warp_view(unstable), warp_view(motion_ids)
    a.adapt, a.sigma_min, a.sums = warp_view(state["adapt"]), warp_view(state["floor"]), warp_view(state["sums"])
    a.error_ema, a.sigmas, a.alpha = warp_view(state["ema"]), warp_view(state["sigmas"]), alpha
    a.steps, a.start_steps = warp_view(state["steps"]), start_steps
    return a, state


def _reference(raws: np.ndarray, unstables: np.ndarray, motions: np.ndarray, adapt, sigma0, floor,
               alpha: float, start_steps: int = 0) -> np.ndarray:
    """Per step the σ ``[S, T]``, in float64 (``S = 1``: every env in row 0)."""
    sigma = np.array(sigma0, float)
    ema, out = np.square(sigma), []
    rows = sigma.shape[0]
    for step, (raw, bad, motion) in enumerate(zip(raws, unstables, motions, strict=True)):
        if step < start_steps:
            out.append(sigma.copy())
            continue
        row_of = motion if rows > 1 else np.zeros_like(motion)
        for row in range(rows):
            mine = (bad == 0) & (row_of == row)
            for i, on in enumerate(adapt):
                if on and mine.any():
                    ema[row, i] += alpha * (raw[mine, i].mean() - ema[row, i])
                    sigma[row, i] = max(floor[i], np.sqrt(min(sigma[row, i] ** 2, ema[row, i])))
        out.append(sigma.copy())
    return np.array(out)


def _play(raws, unstables, motions, adapt, sigma0, floor, alpha, start_steps=0):
    """The kernels over the steps; σ ``[steps, S, T]`` and the step counter after each step."""
    n = raws.shape[1]
    raw, unstable, motion_ids = torch.zeros(n, len(adapt)), torch.zeros(n, dtype=torch.int32), \
        torch.zeros(n, dtype=torch.int32)
    a, state = _bind(raw, unstable, motion_ids, adapt, sigma0, floor, alpha, start_steps)
    got, counted = [], []
    for r, u, m in zip(raws, unstables, motions, strict=True):
        raw.copy_(torch.from_numpy(r))
        unstable.copy_(torch.from_numpy(u))
        motion_ids.copy_(torch.from_numpy(m))
        adapt_sigmas(a)
        got.append(state["sigmas"].numpy().copy())
        counted.append(int(state["steps"][0]))
        assert not state["sums"].any()  # restarted for the next step
    return np.array(got), counted


def test_sigma_follows_the_error_ema_down_never_up_and_stops_at_its_floor():
    n, steps, alpha = 64, 600, 0.02
    adapt, sigma0, floor = [1, 1, 0, 1], [0.3, 0.4, 0.5, 1.0], [0.03, 0.04, 0.05, 0.5]
    rng = np.random.default_rng(0)
    # squared errors: term 0 falls from 0.09 to 0.0004 (σ 0.02 < its floor), term 1 falls then rises again,
    # term 3 stays at 0.25 (σ 0.5: its floor); a few worlds unstable each step, their raw values garbage
    scale = np.stack([np.geomspace(0.09, 4e-4, steps),
                      np.concatenate([np.geomspace(0.16, 0.01, steps // 2), np.full(steps - steps // 2, 0.5)]),
                      np.full(steps, 1.0), np.full(steps, 0.25)], axis=1)
    raws = (scale[:, None, :] * rng.uniform(0.5, 1.5, (steps, n, 4))).astype(np.float32)
    unstables = (rng.random((steps, n)) < 0.05).astype(np.int32)
    raws[unstables == 1] = 1e6
    unstables[10] = 1  # a step with no stable world moves nothing
    motions = rng.integers(0, 3, (steps, n)).astype(np.int32)  # one row for all: the motion is not read
    got, counted = _play(raws, unstables, motions, adapt, [sigma0], floor, alpha)
    want = _reference(raws, unstables, motions, adapt, [sigma0], floor, alpha)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    got = got[:, 0]
    assert (np.diff(got, axis=0) <= 1e-7).all()  # never rises
    assert got[-1, 0] == np.float32(0.03)  # held at its floor
    assert got[-1, 1] < 0.15 and got[-1, 1] == got[steps // 2 + 50, 1]  # errors rose again: σ stays down
    assert (got[:, 2] == np.float32(0.5)).all()  # a term that does not adapt
    assert got[-1, 3] == np.float32(0.5)
    np.testing.assert_array_equal(got[10], got[9])
    assert counted == [0] * steps  # not gated: the counter is never needed


def test_nothing_adapts_before_start_steps_then_the_ema_starts_from_the_configured_sigma():
    n, steps, alpha, start = 32, 120, 0.05, 50
    adapt, sigma0, floor = [1, 0], [0.3, 0.4], [0.01, 0.04]
    rng = np.random.default_rng(2)
    raws = (1e-3 * rng.uniform(0.5, 1.5, (steps, n, 2))).astype(np.float32)  # tracked from the first step
    unstables = np.zeros((steps, n), np.int32)
    motions = rng.integers(0, 2, (steps, n)).astype(np.int32)
    for rows in (1, 2):
        got, counted = _play(raws, unstables, motions, adapt, [sigma0] * rows, floor, alpha, start)
        want = _reference(raws, unstables, motions, adapt, [sigma0] * rows, floor, alpha, start)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
        assert (got[:start] == np.float32(sigma0)).all()  # the configured σ for the first start_steps steps
        assert (got[start:, :, 0] < 0.3).all() and got[-1, 0, 0] < 0.1
        assert counted == [min(k + 1, start) for k in range(steps)]  # counted up to start_steps, no further


def test_per_motion_rows_adapt_each_from_their_own_envs():
    n, steps, alpha = 48, 300, 0.05
    adapt, sigma0, floor = [1, 0], [0.3, 0.4], [0.01, 0.04]
    rng = np.random.default_rng(1)
    # motion 0 tracked (errors 1e-3), motion 1 not (errors 0.5, above σ0²), motion 2 never played
    motions = rng.integers(0, 2, (steps, n)).astype(np.int32)
    raws = np.where(motions[..., None] == 0, 1e-3, 0.5) * rng.uniform(0.5, 1.5, (steps, n, 2))
    raws = raws.astype(np.float32)
    unstables = (rng.random((steps, n)) < 0.05).astype(np.int32)
    got, _ = _play(raws, unstables, motions, adapt, [sigma0] * 3, floor, alpha)
    want = _reference(raws, unstables, motions, adapt, [sigma0] * 3, floor, alpha)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    assert got[-1, 0, 0] < 0.05  # the tracked motion sharpened
    assert got[-1, 1, 0] == np.float32(0.3)  # the motion not yet tracked keeps its σ
    assert (got[-1, 2] == np.float32(sigma0)).all()  # a motion nobody played: untouched
    assert (got[:, :, 1] == np.float32(0.4)).all()  # a term that does not adapt
