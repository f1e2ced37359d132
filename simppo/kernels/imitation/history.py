"""Observation history of the humanoid-imitation env: earlier control steps' proprioceptive blocks in the row.

With ``env.history_length`` H >= 2 the row starts with the proprioceptive block (width ``P``, columns
``[0, P)``, written by :mod:`simppo.kernels.imitation.observations`) followed by H - 1 copies of it from earlier
control steps: copy ``h`` (``prev{h}_*``, columns ``[h P, (h + 1) P)``) is the block the policy saw ``h`` control
steps ago (:func:`simppo.kernels.imitation.spec.obs_terms`). Nothing is recomputed: each control step, before the
new observation is written, every copy moves one step older (:func:`shift_history`); an env whose episode starts
has every copy set to its first block (:func:`fill_history`; Isaac Lab's circular buffer does the same). The actor's
noisy view (``env.obs_noise``) carries its own noisy copies, so a copy is the noisy reading of that step.
"""

import warp as wp

from simppo.kernels.imitation.buffers import ImitationParams


@wp.kernel
def _shift_history(p: ImitationParams, rows_out: wp.array2d(dtype=wp.float32)):
    """``rows_out [N, D]``: copy ``h`` <- copy ``h - 1`` for ``h = H-1 .. 1`` (copy 0: the block of this step).
    One thread per ``(env, column of the block)``.

    # Data in: rows_out[:, 0 : (H - 1) P], p.history_block (P), p.history_copies (H - 1)
    # Data out: rows_out[:, P : H P] (read-modify-write)
    """
    env, c = wp.tid()
    width = p.history_block
    for h in range(p.history_copies, 0, -1):
        rows_out[env, h * width + c] = rows_out[env, (h - 1) * width + c]


@wp.kernel
def _fill_history(p: ImitationParams, mask: wp.array(dtype=wp.bool), rows_out: wp.array2d(dtype=wp.float32)):
    """Where ``mask [N]``: every copy ``h = 1 .. H-1`` of ``rows_out [N, D]`` <- the block of this step.

    # Data in: mask, rows_out[:, 0 : P], p.history_block, p.history_copies
    # Data out: rows_out[:, P : H P] where mask
    """
    env, c = wp.tid()
    if not mask[env]:
        return
    width = p.history_block
    v = rows_out[env, c]
    for h in range(1, p.history_copies + 1):
        rows_out[env, h * width + c] = v


def shift_history(p: ImitationParams, rows: wp.array2d) -> None:
    """Age every history copy of ``rows`` by one control step (before this step's observation is written)."""
    if p.history_copies > 0:
        wp.launch(_shift_history, dim=(rows.shape[0], p.history_block), inputs=[p, rows], device=rows.device)


def fill_history(p: ImitationParams, mask: wp.array, rows: wp.array2d) -> None:
    """Set every history copy of the rows in ``mask [N]`` to their current proprioceptive block (episode start)."""
    if p.history_copies > 0:
        wp.launch(_fill_history, dim=(rows.shape[0], p.history_block), inputs=[p, mask, rows], device=rows.device)
