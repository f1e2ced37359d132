"""Device-resident running statistics (Welford/Chan, float64 accumulators)."""

import torch
from torch import nn


class RunningMeanStd(nn.Module):
    """Running mean/variance over the leading dim of ``[B, *shape]`` batches; normalises with clip."""

    def __init__(self, shape: tuple[int, ...], epsilon: float = 1e-5, clip: float = 5.0):
        super().__init__()
        self.epsilon = epsilon
        self.clip = clip
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(shape, dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> None:
        """Merge a batch ``[B, *shape]`` into the statistics (Chan's parallel update).

        ``mask`` (bool ``[B]``, optional): only those rows are merged; the others (e.g. unstable worlds,
        whose values may be NaN) are ignored. An all-false mask leaves the statistics unchanged. No host sync.
        """
        x = x.reshape(-1, *self.mean.shape).to(torch.float64)
        if mask is None:
            batch_count = x.shape[0]
            batch_mean = x.mean(0)
            batch_var = x.var(0, unbiased=False)
            delta = batch_mean - self.mean
            total = self.count + batch_count
            m2 = self.var * self.count + batch_var * batch_count + delta.square() * self.count * batch_count / total
            self.mean.add_(delta * batch_count / total)
            self.var.copy_(m2 / total)
            self.count.copy_(total)
            return
        w = mask.reshape(-1, *([1] * self.mean.dim())).to(torch.float64)
        x = torch.where(w > 0, x, 0.0)
        batch_count = w.sum()
        batch_mean = (x * w).sum(0) / batch_count.clamp(min=1.0)
        batch_var = ((x - batch_mean).square() * w).sum(0) / batch_count.clamp(min=1.0)
        delta = batch_mean - self.mean
        total = self.count + batch_count
        safe_total = total.clamp(min=1.0)
        m2 = self.var * self.count + batch_var * batch_count + delta.square() * self.count * batch_count / safe_total
        self.mean.add_(delta * batch_count / safe_total)
        self.var.copy_(torch.where(total > 0, m2 / safe_total, self.var))
        self.count.copy_(total)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        mean = self.mean.to(x.dtype)
        std = torch.sqrt(self.var + self.epsilon).to(x.dtype)
        return torch.clamp((x - mean) / std, -self.clip, self.clip)

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
