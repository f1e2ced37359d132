"""The observation-history kernels against NumPy: aging the copies of the proprioceptive block by one control
step, and setting them to the current block where an episode starts (other rows and columns untouched)."""

import numpy as np
import pytest
import torch
import warp as wp

from simppo.kernels.imitation.buffers import ImitationParams
from simppo.kernels.imitation.history import fill_history, shift_history
from simppo.utils.device import warp_view

N, P, TAIL = 5, 7, 4  # envs, block width, columns after the history (future / critic terms)


def _params(copies: int) -> ImitationParams:
    p = ImitationParams()
    p.history_block, p.history_copies = P, copies
    return p


@pytest.mark.parametrize("copies", [0, 1, 3])
def test_shift_ages_every_copy_by_one_step(copies):
    rows = torch.randn(N, P * (copies + 1) + TAIL, generator=torch.Generator().manual_seed(copies))
    want, before = rows.numpy().copy(), rows.numpy().copy()
    for h in range(copies, 0, -1):  # copy h <- copy h - 1, oldest first so nothing is read after it is written
        want[:, h * P:(h + 1) * P] = want[:, (h - 1) * P:h * P]
    shift_history(_params(copies), warp_view(rows))
    wp.synchronize()
    np.testing.assert_array_equal(rows.numpy(), want)
    assert copies == 0 or not np.array_equal(want, before)  # the shift moved something


@pytest.mark.parametrize("copies", [0, 2])
def test_fill_sets_the_copies_of_starting_rows_only(copies):
    rows = torch.randn(N, P * (copies + 1) + TAIL, generator=torch.Generator().manual_seed(7))
    mask = torch.tensor([True, False, True, False, False])
    want = rows.numpy().copy()
    for h in range(1, copies + 1):
        want[mask.numpy(), h * P:(h + 1) * P] = want[mask.numpy(), 0:P]
    fill_history(_params(copies), warp_view(mask, wp.bool), warp_view(rows))
    wp.synchronize()
    np.testing.assert_array_equal(rows.numpy(), want)
