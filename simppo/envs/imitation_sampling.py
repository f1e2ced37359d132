"""Adaptive (failure-driven) sampling of start states over per-motion time bins, on the device.

Each motion is cut into bins of ``bin_size_s`` seconds. Every step, terminations are counted into the
bin (motion, time) where they happened and folded into an EMA of the failure rate. Start states are
drawn from ``(1 - uniform_ratio) * failures + uniform_ratio * uniform`` (uniform: motion weight spread
evenly over its bins), where failures are smoothed towards earlier bins (a fall is usually caused a
little before it happens). No host syncs: everything is torch ops on device tensors.
"""

import math
from dataclasses import dataclass

import torch


@dataclass
class AdaptiveSamplingCfg:
    enabled: bool = True
    bin_size_s: float = 1.0
    ema_alpha: float = 0.001
    uniform_ratio: float = 0.1
    smoothing_decay: float = 0.8  # weight of a bin's failures credited to the bin before it


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
        # the next bin belongs to the same motion (for smoothing towards earlier bins)
        self.has_next = torch.zeros(self.num_bins, dtype=torch.float32, device=device)
        self.has_next[:-1] = (self.bin_motion[1:] == self.bin_motion[:-1]).float()
        weights = motion_weights.to(device=device, dtype=torch.float32)
        uniform = weights[self.bin_motion] / self.motion_num_bins[self.bin_motion].float()
        self.uniform_probs = uniform / uniform.sum()
        self.failure_ema = torch.zeros(self.num_bins, dtype=torch.float32, device=device)
        self._step_failures = torch.zeros(self.num_bins, dtype=torch.float32, device=device)
        self._bin_buf = torch.zeros(0, dtype=torch.int64, device=device)  # multinomial output, sized on use

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
        self._step_failures.zero_()
        self._step_failures.index_add_(0, self.bins_of(motion_ids, times), terminated.float())
        self.failure_ema.mul_(1.0 - self.cfg.ema_alpha).add_(self._step_failures, alpha=self.cfg.ema_alpha)

    def probabilities(self) -> torch.Tensor:
        """Sampling distribution over bins ``[num_bins]``."""
        if not self.cfg.enabled:
            return self.uniform_probs
        f = self.failure_ema.clone()
        f[:-1] += self.cfg.smoothing_decay * self.failure_ema[1:] * self.has_next[:-1]
        total = f.sum()
        has_failures = (total > 0).float()
        failure_probs = f / total.clamp_min(1e-12)
        mix = has_failures * (1.0 - self.cfg.uniform_ratio)
        return mix * failure_probs + (1.0 - mix) * self.uniform_probs

    def sample(self, mask: torch.Tensor, motion_ids_out: torch.Tensor, times_out: torch.Tensor) -> None:
        """Draw new (motion, time) for every env and keep them where ``mask [N]`` (bool) is set."""
        n = mask.shape[0]
        if self._bin_buf.shape[0] != n:
            self._bin_buf = torch.zeros(n, dtype=torch.int64, device=self.device)
        bins = torch.multinomial(self.probabilities(), n, replacement=True, out=self._bin_buf)
        motion = self.bin_motion[bins]
        u = torch.rand(n, 2, device=self.device)
        t = (self.bin_index[bins].float() + u[:, 0]) * self.cfg.bin_size_s
        t = torch.minimum(t, self.motion_lengths[motion])
        if self.motion_frame_dt is not None:
            frame_dt = self.motion_frame_dt[motion]
            t = torch.minimum(torch.floor(t / frame_dt) * frame_dt, self.motion_lengths[motion])
        t = torch.where(u[:, 1] < self.init_start_prob, torch.zeros_like(t), t)
        motion_ids_out.copy_(torch.where(mask, motion.to(motion_ids_out.dtype), motion_ids_out))
        times_out.copy_(torch.where(mask, t, times_out))

    def state_dict(self) -> dict:
        return {"failure_ema": self.failure_ema.clone()}

    def load_state_dict(self, state: dict) -> None:
        self.failure_ema.copy_(state["failure_ema"])
