"""The termination curriculum's kernels against NumPy (float64): the termination-rate EMA and the factor's moves,
step by step, over a run whose termination rate falls and rises again."""

import numpy as np
import torch
import warp as wp

from simppo.kernels.imitation.curriculum import TerminationCurriculum, update_termination_scale
from simppo.utils.device import warp_view


def _curriculum(terminated: torch.Tensor, start: float, alpha: float, step: float, survive_steps: float):
    state = {"count": torch.zeros(1), "rate": torch.zeros(1), "scale": torch.full((1,), start)}
    c = TerminationCurriculum()
    c.terminated = warp_view(terminated, wp.bool)
    c.count, c.rate_ema, c.scale = (warp_view(state[k]) for k in ("count", "rate", "scale"))
    c.alpha, c.step, c.survive_steps, c.lo, c.hi = alpha, step, survive_steps, 1.0, start
    return c, state


def _reference(masks: np.ndarray, start: float, alpha: float, step: float, survive_steps: float):
    """Per step (rate EMA, factor) in float64: tighter while ``ema * survive_steps < 1``, wider otherwise."""
    ema, scale, out = 0.0, start, []
    for m in masks:
        ema += alpha * (m.mean() - ema)
        scale = max(1.0, scale * (1 - step)) if ema * survive_steps < 1 else min(start, scale * (1 + step))
        out.append((ema, scale))
    return np.array(out)


def test_curriculum_matches_reference_and_tightens_only_while_envs_survive():
    n, start, alpha, step, survive = 256, 2.0, 0.05, 0.01, 50.0
    rng = np.random.default_rng(0)
    # termination probability per env-step: high (2 %, an env survives 50 steps: widen), low, high, then none
    probs = np.concatenate([np.full(100, 0.04), np.full(150, 0.005), np.full(100, 0.05), np.zeros(400)])
    masks = rng.random((probs.size, n)) < probs[:, None]
    terminated = torch.zeros(n, dtype=torch.bool)
    c, state = _curriculum(terminated, start, alpha, step, survive)
    got = []
    for m in masks:
        terminated.copy_(torch.from_numpy(m))
        update_termination_scale(c)
        got.append((float(state["rate"][0]), float(state["scale"][0])))
        assert float(state["count"][0]) == 0.0  # restarted for the next step
    got, want = np.array(got), _reference(masks, start, alpha, step, survive)
    np.testing.assert_allclose(got[:, 0], want[:, 0], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(got[:, 1], want[:, 1], rtol=1e-4)
    scale = got[:, 1]
    assert scale[99] == start  # frequent terminations: held at its widest
    assert scale[249] < 1.5  # rare terminations: tightened
    assert scale[349] > scale[249]  # frequent again: widened
    assert scale[-1] == 1.0  # none: down to the configured thresholds, not below
    assert (scale >= 1.0).all() and (scale <= start).all()
