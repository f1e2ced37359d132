"""Adaptive (failure-driven) sampling of start states over per-motion time bins, on the device.

BeyondMimic / mjlab's rule, extended to a motion library. Each motion is cut into bins of ``bin_size_s``
seconds. Every step, terminations are counted into the bin (motion, time) where they happened and folded
into an EMA of the per-step failure count. A bin is drawn with probability proportional to

    smooth(failure_ema)[b] + uniform_ratio * uniform[b]

where ``uniform`` spreads each motion's weight evenly over its bins (it sums to 1, so the floor is
absolute: while failures are frequent they dominate, and as they become rare sampling returns to
uniform), and ``smooth`` credits a bin with the failures of the next ``smoothing_kernel_size - 1`` bins
of the same motion with weights ``smoothing_lambda ** k`` (normalised; a fall is caused a little
before it happens; the motion's last bin is repeated past its end, as mjlab pads). Start times are drawn
uniformly inside the bin and strictly inside the clip. No host syncs: torch ops on device tensors.

Large motion sets (more than ``large_bins`` bins) keep a step's cost independent of the number of motions: the EMA
is stored divided by ``(1 - ema_alpha)^t`` (a host number), so a step writes only the bins of its terminations,
and bins are drawn by inverse CDF from the distribution recomputed every ``refresh_every`` steps (at most one PPO
rollout old), instead of a multinomial over every bin at every step.
"""

import math
from dataclasses import dataclass

import torch


@dataclass
class AdaptiveSamplingCfg:
    enabled: bool = True
    bin_size_s: float = 1.0
    ema_alpha: float = 0.001
    uniform_ratio: float = 0.1  # absolute floor: weight of the uniform distribution against the failure counts
    smoothing_kernel_size: int = 3  # bins ahead (this one included) whose failures a bin is credited with
    smoothing_lambda: float = 0.8  # weight of the k-th bin ahead: lambda ** k (normalised)
    # Above this many bins (large motion sets) a step costs O(envs) instead of O(bins): the EMA decays lazily (one
    # host scale factor, folded in every ~46k steps) and the distribution is recomputed every refresh_every steps.
    large_bins: int = 4096
    refresh_every: int = 24


class AdaptiveSampler:
    """Samples (motion id, time) pairs for the envs in a mask; keeps ``failure_ema [num_bins]``."""

    def __init__(self, motion_lengths: list[float], motion_weights: torch.Tensor, cfg: AdaptiveSamplingCfg,
                 init_start_prob: float, device: str, motion_frame_dt: torch.Tensor | None = None):
        self.cfg = cfg
        self.init_start_prob = float(init_start_prob)
        self.device = device
        nbins = [max(1, math.ceil(length / cfg.bin_size_s - 1e-6)) for length in motion_lengths]
        self.num_bins = sum(nbins)
        offsets = [0]
        for n in nbins[:-1]:
            offsets.append(offsets[-1] + n)
        i64 = {"dtype": torch.int64, "device": device}
        self.bin_offset = torch.tensor(offsets, **i64)
        self.motion_num_bins = torch.tensor(nbins, **i64)
        self.bin_motion = torch.repeat_interleave(torch.arange(len(nbins), **i64), self.motion_num_bins)
        self.bin_index = torch.arange(self.num_bins, **i64) - self.bin_offset[self.bin_motion]
        self.motion_lengths = torch.tensor(motion_lengths, dtype=torch.float32, device=device)
        # start times snap to stored frames, where the reference is exactly forward-kinematics-consistent
        self.motion_frame_dt = None if motion_frame_dt is None else motion_frame_dt.to(device, torch.float32)
        # smoothing: bin b takes sum_k w_k * ema[ahead[k, b]], ahead = b + k clamped to its motion's last bin
        k = max(1, int(cfg.smoothing_kernel_size))
        last_bin = (self.bin_offset + self.motion_num_bins - 1)[self.bin_motion]
        steps = torch.arange(k, **i64)
        self.ahead = torch.minimum(torch.arange(self.num_bins, **i64)[None, :] + steps[:, None], last_bin[None, :])
        w = torch.tensor([cfg.smoothing_lambda ** i for i in range(k)], dtype=torch.float32, device=device)
        self.kernel = (w / w.sum())[:, None]
        weights = motion_weights.to(device=device, dtype=torch.float32)
        uniform = weights[self.bin_motion] / self.motion_num_bins[self.bin_motion].float()
        self.uniform_probs = uniform / uniform.sum()
        self.failure_ema = torch.zeros(self.num_bins, dtype=torch.float32, device=device)
        self._step_failures = torch.zeros(self.num_bins, dtype=torch.float32, device=device)
        self._bin_buf = torch.zeros(0, dtype=torch.int64, device=device)  # multinomial output, sized on use
        # large sets: failure_ema holds the EMA divided by the host scale (1 - alpha)^t; the CDF is refreshed
        self.amortized = self.num_bins > cfg.large_bins
        self._scale, self._updates, self._cdf = 1.0, 0, None

    def bins_of(self, motion_ids: torch.Tensor, times: torch.Tensor) -> torch.Tensor:
        """Flat bin index ``[N]`` of each (motion, time)."""
        m = motion_ids.long()
        local = torch.clamp((times / self.cfg.bin_size_s).long(), min=0)
        local = torch.minimum(local, self.motion_num_bins[m] - 1)
        return self.bin_offset[m] + local

    def update(self, motion_ids: torch.Tensor, times: torch.Tensor, terminated: torch.Tensor) -> None:
        """Fold this step's terminations ``[N]`` into the failure EMA."""
        if not self.cfg.enabled:
            return
        if self.amortized:
            self._update_lazily(self.bins_of(motion_ids, times), terminated)
            return
        self._step_failures.zero_()
        self._step_failures.index_add_(0, self.bins_of(motion_ids, times), terminated.float())
        self.failure_ema.mul_(1.0 - self.cfg.ema_alpha).add_(self._step_failures, alpha=self.cfg.ema_alpha)

    def _update_lazily(self, bins: torch.Tensor, terminated: torch.Tensor) -> None:
        """ema_t = (1 - a) ema_(t-1) + a f_t kept as ema / (1 - a)^t: only the bins of this step's envs are written.
        The scale is a host number (a function of the step count), never read from the device."""
        a = self.cfg.ema_alpha
        self._scale *= 1.0 - a
        self.failure_ema.index_add_(0, bins, terminated.float(), alpha=a / self._scale)
        if self._scale < 1e-20:  # fold the scale in before float32 runs out of range (every ~46k steps)
            self.failure_ema.mul_(self._scale)
            self._scale = 1.0
        self._updates += 1
        if self._updates % max(1, self.cfg.refresh_every) == 0:
            self._cdf = None

    def ema(self) -> torch.Tensor:
        """The failure EMA ``[num_bins]``."""
        return self.failure_ema * self._scale if self.amortized else self.failure_ema

    def probabilities(self) -> torch.Tensor:
        """Sampling distribution over bins ``[num_bins]``."""
        if not self.cfg.enabled:
            return self.uniform_probs
        smoothed = (self.kernel * self.ema()[self.ahead]).sum(0)
        p = smoothed + self.cfg.uniform_ratio * self.uniform_probs
        return p / p.sum()

    def metrics(self) -> dict[str, torch.Tensor]:
        """Device scalars: entropy of the bin distribution normalised by log(num_bins) (1 = uniform over
        bins) and the probability of the most likely bin."""
        p = self.probabilities()
        entropy = -(p * (p + 1e-12).log()).sum() / max(math.log(self.num_bins), 1e-12)
        return {"sampler/entropy": entropy, "sampler/top_bin_prob": p.max()}

    def sample(self, mask: torch.Tensor, motion_ids_out: torch.Tensor, times_out: torch.Tensor) -> None:
        """Draw new (motion, time) for every env and keep them where ``mask [N]`` (bool) is set."""
        n = mask.shape[0]
        if self.amortized:  # inverse CDF of the last refreshed distribution: O(n log bins)
            if self._cdf is None:
                self._cdf = torch.cumsum(self.probabilities().double(), 0)
            u = torch.rand(n, 3, device=self.device)
            bins = torch.searchsorted(self._cdf, (u[:, 2] * self._cdf[-1]).double(), right=True)
            bins = bins.clamp_(max=self.num_bins - 1)
        else:
            if self._bin_buf.shape[0] != n:
                self._bin_buf = torch.zeros(n, dtype=torch.int64, device=self.device)
            bins = torch.multinomial(self.probabilities(), n, replacement=True, out=self._bin_buf)
            u = torch.rand(n, 2, device=self.device)
        motion = self.bin_motion[bins]
        length = self.motion_lengths[motion]
        start = self.bin_index[bins].float() * self.cfg.bin_size_s
        end = torch.minimum(start + self.cfg.bin_size_s, length)
        t = start + u[:, 0] * (end - start)  # uniform in [start, end): strictly inside the clip
        if self.motion_frame_dt is not None:
            frame_dt = self.motion_frame_dt[motion]
            t = torch.floor(t / frame_dt) * frame_dt
        # float rounding must not reach the clip end (a one-step episode); one-frame clips start at 0
        t = torch.minimum(t, torch.clamp(length - 1e-4, min=0.0))
        t = torch.where(u[:, 1] < self.init_start_prob, torch.zeros_like(t), t)
        motion_ids_out.copy_(torch.where(mask, motion.to(motion_ids_out.dtype), motion_ids_out))
        times_out.copy_(torch.where(mask, t, times_out))

    def state_dict(self) -> dict:
        return {"failure_ema": self.ema().clone()}

    def load_state_dict(self, state: dict) -> None:
        """Restore the failure EMA. A state with fewer bins comes from a motion set that has since grown by
        appended motions (the motion-set check of the checkpoint has verified the old ones are unchanged):
        their bins keep their EMA, the new bins start at zero."""
        ema = state["failure_ema"]
        if ema.shape[0] > self.num_bins:
            raise ValueError(f"sampler state has {ema.shape[0]} bins, this motion set {self.num_bins}")
        self.failure_ema.zero_()
        self.failure_ema[:ema.shape[0]].copy_(ema)
        self._scale, self._cdf = 1.0, None
