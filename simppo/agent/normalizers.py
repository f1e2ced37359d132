"""Device-resident running statistics (Welford/Chan, float64 accumulators).

With several ranks (DDP) each rank's statistics include its own batches at once, and the batches every rank
merged since the last :func:`sync_running_stats` (count, mean and M2 per rank, all-gathered once) are merged
into the shared base at the end of each rollout, so that every rank holds the same statistics after it.
"""

from collections.abc import Sequence

import torch
from torch import nn

from simppo.agent.distributed import all_gather_tensor


def merge_moments(count_a: torch.Tensor, mean_a: torch.Tensor, m2_a: torch.Tensor, count_b: torch.Tensor,
                  mean_b: torch.Tensor, m2_b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Chan's parallel merge of two sets of moments (count, mean, M2 = count · variance); empty sets are fine."""
    total = count_a + count_b
    safe = total.clamp(min=1.0)
    delta = mean_b - mean_a
    return total, mean_a + delta * count_b / safe, m2_a + m2_b + delta.square() * count_a * count_b / safe


class RunningMeanStd(nn.Module):
    """Running mean/variance over the leading dim of ``[B, *shape]`` batches; normalises with clip."""

    def __init__(self, shape: tuple[int, ...], epsilon: float = 1e-5, clip: float = 5.0):
        super().__init__()
        self.epsilon = epsilon
        self.clip = clip
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(shape, dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.synced = False  # track_pending(): several ranks, merged by sync_running_stats

    def track_pending(self) -> None:
        """Several ranks: also accumulate this rank's batches since the last sync (count, mean, M2), and keep
        the statistics of the last sync as the base they are merged into. Not saved: a checkpoint is written
        after a sync, when nothing is pending."""
        if self.synced:
            return
        f64 = {"dtype": torch.float64, "device": self.mean.device}
        self.register_buffer("_base_count", self.count.clone(), persistent=False)
        self.register_buffer("_base_mean", self.mean.clone(), persistent=False)
        self.register_buffer("_base_m2", self.var * self.count, persistent=False)
        self.register_buffer("_pending", torch.zeros(1 + 2 * self.mean.numel(), **f64), persistent=False)
        self.synced = True

    def _add_pending(self, batch_count: torch.Tensor, batch_mean: torch.Tensor, batch_var: torch.Tensor) -> None:
        d = self.mean.numel()
        p = self._pending
        count, mean, m2 = merge_moments(p[0], p[1:1 + d], p[1 + d:], batch_count, batch_mean.reshape(-1),
                                        (batch_var * batch_count).reshape(-1))
        p[0] = count
        p[1:1 + d] = mean
        p[1 + d:] = m2

    @torch.no_grad()
    def merge_pending(self, gathered: torch.Tensor) -> None:
        """Set the statistics to the base merged with every rank's pending moments ``gathered``
        ``[world_size, 1 + 2 · numel]`` (rows in rank order, identical on every rank); that is the new base."""
        d = self.mean.numel()
        counts, means, m2s = gathered[:, :1], gathered[:, 1:1 + d], gathered[:, 1 + d:]
        total = counts.sum(0)
        mean = (counts * means).sum(0) / total.clamp(min=1.0)
        m2 = m2s.sum(0) + (counts * (means - mean).square()).sum(0)
        count, mean, m2 = merge_moments(self._base_count, self._base_mean.reshape(-1), self._base_m2.reshape(-1),
                                        total[0], mean, m2)
        self.count.copy_(count)
        self.mean.copy_(mean.reshape(self.mean.shape))
        self.var.copy_(torch.where(count > 0, m2 / count.clamp(min=1.0), 1.0).reshape(self.var.shape))
        self._mark_synced()

    def _mark_synced(self) -> None:
        self._base_count.copy_(self.count)
        self._base_mean.copy_(self.mean)
        self._base_m2.copy_(self.var * self.count)
        self._pending.zero_()

    def _load_from_state_dict(self, *args, **kwargs):
        super()._load_from_state_dict(*args, **kwargs)
        if self.synced:  # loaded statistics are the new base; nothing pending
            self._mark_synced()

    @torch.no_grad()
    def update(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> None:
        """Merge a batch ``[B, *shape]`` into the statistics (Chan's parallel update).

        The batch's own moments are taken in its dtype (float32 observations stay float32: the ``[B, D]`` pass is
        the costly one) and only the ``[D]`` moments are merged into the float64 accumulators, where a long run's
        count and mean need the precision. ``mask`` (bool ``[B]``, optional): only those rows are merged; the
        others (e.g. unstable worlds, whose values may be NaN) are ignored. An all-false mask leaves the
        statistics unchanged. No host sync.
        """
        x = x.reshape(-1, *self.mean.shape)
        if not x.is_floating_point():
            x = x.to(torch.float32)
        if mask is None:
            batch_count = torch.full((), float(x.shape[0]), dtype=torch.float64, device=x.device)
            batch_var, batch_mean = torch.var_mean(x, 0, correction=0)
        else:
            w = mask.reshape(-1, *([1] * self.mean.dim())).to(x.dtype)
            x = torch.where(w > 0, x, 0.0)
            count = w.sum()
            batch_count = count.to(torch.float64)
            batch_mean = x.mul(w).sum(0) / count.clamp(min=1.0)
            batch_var = (x - batch_mean).square_().mul_(w).sum(0) / count.clamp(min=1.0)
        batch_mean, batch_var = batch_mean.to(torch.float64), batch_var.to(torch.float64)
        total, mean, m2 = merge_moments(self.count, self.mean, self.var * self.count, batch_count, batch_mean,
                                        batch_var * batch_count)
        self.mean.copy_(mean)
        self.var.copy_(torch.where(total > 0, m2 / total.clamp(min=1.0), self.var))
        self.count.copy_(total)
        if self.synced:
            self._add_pending(batch_count, batch_mean, batch_var)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        mean = self.mean.to(x.dtype)
        std = torch.sqrt(self.var + self.epsilon).to(x.dtype)
        return torch.clamp((x - mean) / std, -self.clip, self.clip)

    def denormalize(self, x: torch.Tensor) -> torch.Tensor:
        """The inverse of :meth:`normalize` (exact where it did not clip)."""
        return x * torch.sqrt(self.var + self.epsilon).to(x.dtype) + self.mean.to(x.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.normalize(x)


class RewardNormalizer(nn.Module):
    """Scales rewards by the running std of the per-env discounted return (no mean shift)."""

    def __init__(self, num_envs: int, gamma: float, epsilon: float = 1e-5):
        super().__init__()
        self.gamma = gamma
        self.epsilon = epsilon
        self.return_rms = RunningMeanStd((), epsilon=epsilon, clip=float("inf"))
        self.register_buffer("returns", torch.zeros(num_envs, dtype=torch.float64))

    @torch.no_grad()
    def forward(self, rewards: torch.Tensor, dones: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
        """``rewards`` ``[N]``, ``dones`` ``[N]`` (episode ended after this reward) → scaled ``[N]``.

        ``valid`` (bool ``[N]``, optional): envs whose reward counts; the others (unstable worlds) add
        nothing to their return, stay out of the return statistics and get a scaled reward of 0."""
        r = rewards.to(torch.float64)
        if valid is not None:
            r = torch.where(valid, r, 0.0)
        self.returns.mul_(self.gamma).add_(r)
        self.return_rms.update(self.returns, mask=valid)
        self.returns.mul_(1.0 - dones.to(torch.float64))
        std = torch.sqrt(self.return_rms.var + self.epsilon)
        scaled = (rewards / std.to(rewards.dtype)).to(rewards.dtype)
        return scaled if valid is None else torch.where(valid, scaled, 0.0)


@torch.no_grad()
def sync_running_stats(stats: Sequence[RunningMeanStd]) -> None:
    """Merge the batches every rank added to ``stats`` since the last sync (one all-gather of their packed
    pending moments); afterwards the statistics are identical on every rank. Every rank must call it with the
    same normalizers in the same order; they must have :meth:`RunningMeanStd.track_pending` enabled."""
    stats = [s for s in stats if s.synced]
    if not stats:
        return
    gathered = all_gather_tensor(torch.cat([s._pending for s in stats]))  # [W, sum of 1 + 2·numel]
    start = 0
    for s in stats:
        width = s._pending.numel()
        s.merge_pending(gathered[:, start:start + width])
        start += width
