"""The env's per-step bookkeeping kernels against torch references."""

import numpy as np
import torch
import warp as wp

from simppo.kernels.imitation.episodes import EpisodeBuffers, advance_clock, close_episodes, copy_rows, record_step
from simppo.kernels.types import SimState
from simppo.utils.device import init_warp, warp_view


def _buffers(n=7, nsums=4, nerr=3, ncause=3, seed=0):
    init_warp()
    g = torch.Generator().manual_seed(seed)
    t = {
        "episode_length": torch.randint(0, 50, (n,), generator=g, dtype=torch.int32),
        "times": torch.rand(n, generator=g) * 3,
        "terminated": torch.rand(n, generator=g) < 0.4,
        "truncated": torch.rand(n, generator=g) < 0.3,
        "term_cause": torch.randint(0, ncause + 1, (n,), generator=g, dtype=torch.int32),
        "cause_codes": torch.arange(1, ncause + 1, dtype=torch.int32),
        "episode_sums": torch.randn(n, nsums, generator=g),
        "errors": torch.rand(n, nerr, generator=g),
        "done": torch.zeros(n, dtype=torch.bool),
        "reset_mask": torch.zeros(n, dtype=torch.bool),
        "done_stats": torch.full((n, nsums + 1 + ncause), float("nan")),
        "step_unstable": torch.zeros(n, dtype=torch.bool),
        "step_num_unstable": torch.full((1,), 5, dtype=torch.int32),
        "error_sum": torch.ones(nerr),
    }
    b = EpisodeBuffers()
    for field, key in (("episode_length", "episode_length"), ("times", "times"), ("term_cause", "term_cause"),
                       ("cause_codes", "cause_codes"), ("episode_sums", "episode_sums"), ("errors", "errors"),
                       ("done_stats_out", "done_stats"), ("step_num_unstable_out", "step_num_unstable"),
                       ("error_sum_out", "error_sum")):
        setattr(b, field, warp_view(t[key]))
    for field, key in (("terminated", "terminated"), ("truncated", "truncated"), ("done_out", "done"),
                       ("reset_mask_out", "reset_mask"), ("step_unstable_out", "step_unstable")):
        setattr(b, field, warp_view(t[key], wp.bool))
    b.dt = 0.02
    return b, t


def test_advance_clock():
    b, t = _buffers()
    length, times = t["episode_length"].clone(), t["times"].clone()
    advance_clock(b)
    assert torch.equal(t["episode_length"], length + 1)
    assert torch.equal(t["times"], times + torch.tensor(0.02))
    assert int(t["step_num_unstable"][0]) == 0


def test_record_step_flags_unstable_worlds_and_sums_errors():
    b, t = _buffers()
    unstable = torch.tensor([0, 1, 0, 0, 2, 0, 1], dtype=torch.int32)
    sim = SimState()
    sim.unstable = warp_view(unstable)
    t["step_num_unstable"].zero_()
    record_step(sim, b)
    assert torch.equal(t["step_unstable"], unstable != 0)
    assert int(t["step_num_unstable"][0]) == 3
    np.testing.assert_allclose(t["error_sum"].numpy(), 1.0 + t["errors"].double().sum(0).numpy(), rtol=1e-6)


def test_close_episodes_reports_and_clears_the_ended_ones():
    b, t = _buffers()
    length, sums = t["episode_length"].clone(), t["episode_sums"].clone()
    close_episodes(b)
    done = t["terminated"] | t["truncated"]
    assert done.any() and not done.all()
    assert torch.equal(t["done"], done) and torch.equal(t["reset_mask"], done)
    nsums = sums.shape[1]
    assert torch.equal(t["done_stats"][:, :nsums], sums)
    assert torch.equal(t["done_stats"][:, nsums], length.float())
    onehot = (t["term_cause"][:, None] == t["cause_codes"][None, :]).float()
    assert torch.equal(t["done_stats"][:, nsums + 1:], onehot)
    assert torch.equal(t["episode_length"], torch.where(done, 0, length))
    assert torch.equal(t["episode_sums"], torch.where(done[:, None], 0.0, sums))


def test_copy_rows():
    init_warp()
    src, dst = torch.randn(5, 9), torch.zeros(5, 9)
    copy_rows(warp_view(src), warp_view(dst))
    assert torch.equal(src, dst)
