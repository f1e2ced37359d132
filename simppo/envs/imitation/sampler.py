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
uniformly inside the bin and strictly inside the clip.

That rule is made for one clip. Over a motion set the clips that still fail take nearly every start, the
clips already tracked get almost none and are forgotten (docs/learning.md measures it). So a share
``motion_floor`` of the starts is spread over the motions by their weights, each motion's share drawn over its
own bins by the rule above; the rest follows the rule across all motions. ``motion_floor = 0`` is the rule alone.
``motion_split = "rate"`` splits that rest over the motions by their failure rates (failures per env-step) instead
of their failure counts: a count grows with the starts a motion already has, so under counts a long clip that
fails everywhere takes the whole failure-driven share from a short clip that fails as often.

The work is done by the Warp kernels of :mod:`simppo.kernels.imitation.sampler`: a step writes only the bins of
the envs that terminated (the EMA is kept divided by a decay scale on the device), the distribution is folded into
a CDF every step for small sets and every ``refresh_every`` steps above ``large_bins`` bins (so a step costs
O(envs), not O(bins)), and only the envs that reset draw, by inverse CDF from their own random states. No host
syncs and no decision on the host: the whole sequence can be captured in the env's step graph.
"""

import math
from dataclasses import dataclass

import torch
import warp as wp

from simppo.envs.imitation.rng import RNG_SAMPLER, rng_states
from simppo.kernels.imitation.sampler import (
    SamplerState,
    SamplerTables,
    count_failures,
    draw_starts,
    num_chunks,
    refresh,
)
from simppo.utils.device import torch_stream_scope, warp_device, warp_view

MOTION_SPLITS = ("count", "rate")


@dataclass
class AdaptiveSamplingCfg:
    enabled: bool = True
    bin_size_s: float = 1.0
    ema_alpha: float = 0.001
    uniform_ratio: float = 0.1  # absolute floor: weight of the uniform distribution against the failure counts
    # share of the starts spread over the motions by their weights (each over its own bins by its failures);
    # the rest goes where the failures are, across motions
    motion_floor: float = 0.5
    # how the rest is split over the motions: "count" (by their failures: the rule across all bins) or "rate" (by
    # failures per env-step of each motion, each motion's part drawn over its own bins by the rule)
    motion_split: str = "count"
    smoothing_kernel_size: int = 3  # bins ahead (this one included) whose failures a bin is credited with
    smoothing_lambda: float = 0.8  # weight of the k-th bin ahead: lambda ** k (normalised)
    # Above this many bins (large motion sets) the distribution is refolded every refresh_every steps (at most one
    # PPO rollout old) instead of every step, so a step costs O(envs) instead of O(bins).
    large_bins: int = 4096
    refresh_every: int = 24

    def __post_init__(self) -> None:
        if not 0.0 <= self.motion_floor <= 1.0:
            raise ValueError(f"env.sampling.motion_floor={self.motion_floor}: must be in [0, 1]")
        if self.motion_split not in MOTION_SPLITS:
            raise ValueError(f"env.sampling.motion_split={self.motion_split!r}: must be one of {list(MOTION_SPLITS)}")


def _wp(x: torch.Tensor | wp.array, dtype=None) -> wp.array:
    return x if isinstance(x, wp.array) else warp_view(x, dtype)


class AdaptiveSampler:
    """Samples (motion id, time) pairs for the envs in a mask; keeps the failure EMA ``[num_bins]``.

    ``failure_ema`` is the stored EMA (divided by the device decay scale; :meth:`ema` gives the EMA itself);
    after writing it by hand, call :meth:`refresh`. ``num_envs`` and ``seed`` give each env its own random
    stream (a mask of another size gets fresh streams of the same seed, on the host: not for a hot path)."""

    def __init__(self, motion_lengths: list[float], motion_weights: torch.Tensor, cfg: AdaptiveSamplingCfg,
                 init_start_prob: float, device: str, motion_frame_dt: torch.Tensor | None = None,
                 num_envs: int = 1, seed: int = 0):
        self.cfg = cfg
        self.init_start_prob = float(init_start_prob)
        self.device, self.wp_device = device, warp_device(device)
        self.seed = int(seed)
        nbins = [max(1, math.ceil(length / cfg.bin_size_s - 1e-6)) for length in motion_lengths]
        self.num_bins = sum(nbins)
        offsets = [0]
        for n in nbins[:-1]:
            offsets.append(offsets[-1] + n)
        i32 = {"dtype": torch.int32, "device": device}
        self.bin_offset = torch.tensor(offsets, **i32)
        self.motion_num_bins = torch.tensor(nbins, **i32)
        self.bin_motion = torch.repeat_interleave(torch.arange(len(nbins), **i32), self.motion_num_bins.long())
        self.bin_index = (torch.arange(self.num_bins, **i32) - self.bin_offset[self.bin_motion.long()]).int()
        self.motion_lengths = torch.tensor(motion_lengths, dtype=torch.float32, device=device)
        # start times snap to stored frames, where the reference is exactly forward-kinematics-consistent
        self.motion_frame_dt = torch.zeros_like(self.motion_lengths) if motion_frame_dt is None else \
            motion_frame_dt.to(device, torch.float32).contiguous()
        # smoothing: bin b takes sum_k w_k * ema[ahead[k, b]], ahead = b + k clamped to its motion's last bin
        k = max(1, int(cfg.smoothing_kernel_size))
        last_bin = (self.bin_offset + self.motion_num_bins - 1)[self.bin_motion.long()]
        steps = torch.arange(k, **i32)
        self.ahead = torch.minimum(torch.arange(self.num_bins, **i32)[None, :] + steps[:, None],
                                   last_bin[None, :]).int().contiguous()
        w = torch.tensor([cfg.smoothing_lambda ** i for i in range(k)], dtype=torch.float32, device=device)
        self.kernel = w / w.sum()
        weights = motion_weights.to(device=device, dtype=torch.float32)
        uniform = weights[self.bin_motion.long()] / self.motion_num_bins[self.bin_motion.long()].float()
        self.uniform_probs = (uniform / uniform.sum()).contiguous()
        self.motion_weights = (weights / weights.sum()).contiguous()
        self.amortized = self.num_bins > cfg.large_bins
        # device state: stored EMA, decay scale, steps since the refresh, CDF, scan scratch, random streams
        self.failure_ema = torch.zeros(self.num_bins, dtype=torch.float32, device=device)
        self.motion_visits = torch.zeros(len(nbins), dtype=torch.float32, device=device)  # stored, like failure_ema
        self.scale = torch.ones(1, dtype=torch.float64, device=device)
        self.steps = torch.zeros(1, **i32)
        f64 = {"dtype": torch.float64, "device": device}
        self.cdf = torch.zeros(self.num_bins, **f64)
        self._weight = torch.zeros(self.num_bins, **f64)
        self._motion_factor = torch.zeros(len(nbins), **f64)
        self._motion_own = torch.zeros(len(nbins), **f64)
        self._motion_rate = torch.zeros(len(nbins), **f64)
        self._rate_total = torch.zeros(1, **f64)
        self._chunk_sum = torch.zeros(num_chunks(self.num_bins), **f64)
        self._total = torch.zeros(1, **f64)
        self.rng = rng_states(self.seed, RNG_SAMPLER, num_envs, device)
        self.tables, self.state = self._bind()
        self.refresh()

    def _bind(self) -> tuple[SamplerTables, SamplerState]:
        cfg, t = self.cfg, SamplerTables()
        for name in ("bin_offset", "motion_num_bins", "motion_lengths", "motion_frame_dt", "motion_weights",
                     "bin_motion", "bin_index", "uniform_probs", "ahead", "kernel"):
            setattr(t, name, warp_view(getattr(self, name)))
        t.bin_size, t.ema_alpha, t.uniform_ratio = float(cfg.bin_size_s), float(cfg.ema_alpha), float(cfg.uniform_ratio)
        t.motion_floor, t.split_by_rate = float(cfg.motion_floor), int(cfg.motion_split == "rate")
        t.init_start_prob, t.enabled = self.init_start_prob, int(cfg.enabled)
        t.refresh_every = max(1, int(cfg.refresh_every)) if self.amortized else 1
        s = SamplerState()
        s.stored_ema, s.scale, s.steps = warp_view(self.failure_ema), warp_view(self.scale), warp_view(self.steps)
        s.stored_visits = warp_view(self.motion_visits)
        s.motion_own, s.motion_rate = warp_view(self._motion_own), warp_view(self._motion_rate)
        s.rate_total = warp_view(self._rate_total)
        s.cdf, s.chunk_sum, s.rng = warp_view(self.cdf), warp_view(self._chunk_sum), warp_view(self.rng, wp.uint32)
        s.weight, s.motion_factor, s.total = warp_view(self._weight), warp_view(self._motion_factor), \
            warp_view(self._total)
        return t, s

    def bins_of(self, motion_ids: torch.Tensor, times: torch.Tensor) -> torch.Tensor:
        """Flat bin index ``[N]`` (int64) of each (motion, time)."""
        m = motion_ids.long()
        local = torch.clamp((times / self.cfg.bin_size_s).long(), min=0)
        local = torch.minimum(local, self.motion_num_bins[m].long() - 1)
        return self.bin_offset[m].long() + local

    def update(self, motion_ids: torch.Tensor | wp.array, times: torch.Tensor | wp.array,
               terminated: torch.Tensor | wp.array) -> None:
        """Fold this step's terminations ``[N]`` (bool) at ``(motion_ids int32, times float32)`` into the failure
        EMA, then refresh the distribution when due."""
        if not self.cfg.enabled:
            return
        with torch_stream_scope(self.wp_device):
            count_failures(self.tables, self.state, _wp(motion_ids), _wp(times), _wp(terminated, wp.bool))
            refresh(self.tables, self.state)

    def refresh(self) -> None:
        """Refold the sampling distribution now (after ``failure_ema`` was written by hand)."""
        with torch_stream_scope(self.wp_device):
            refresh(self.tables, self.state, force=True)

    def ema(self) -> torch.Tensor:
        """The failure EMA ``[num_bins]``."""
        return (self.failure_ema.double() * self.scale).float()

    def visits(self) -> torch.Tensor:
        """The EMA of each motion's env-steps ``[num_motions]`` (counted with ``motion_split="rate"`` only)."""
        return (self.motion_visits.double() * self.scale).float()

    def failure_rates(self) -> torch.Tensor:
        """Each motion's failures per env-step ``[num_motions]`` (float64; 0 before its first visit)."""
        visits = self.visits().double()
        failures = self._per_motion(self.ema().double())
        return torch.where(visits > 0, failures / visits.clamp_min(1e-300), 0.0)

    def probabilities(self) -> torch.Tensor:
        """Sampling distribution over bins ``[num_bins]`` from the current EMA (the draws use the last refresh)."""
        if not self.cfg.enabled:
            return self.uniform_probs
        smoothed = (self.kernel[:, None] * self.ema()[self.ahead.long()]).sum(0)
        p = (smoothed + self.cfg.uniform_ratio * self.uniform_probs).double()
        own = self._per_motion(p)
        floor, w = self.cfg.motion_floor, self.motion_weights.double()
        if self.cfg.motion_split == "rate":
            rates = self.failure_rates()
            total = rates.sum()
            share = torch.where(total > 0, rates / total.clamp_min(1e-300), w)  # no host read: logged every iteration
            factor = torch.where(own > 0, ((1.0 - floor) * share + floor * w) / own.clamp_min(1e-300), 0.0)
        else:
            factor = (1.0 - floor) / p.sum() + torch.where(own > 0, floor * w / own.clamp_min(1e-300), 0.0)
        p = p * factor[self.bin_motion.long()]
        return (p / p.sum()).float()

    def _per_motion(self, per_bin: torch.Tensor) -> torch.Tensor:
        """Sum of ``per_bin [num_bins]`` over each motion's bins ``[num_motions]``."""
        out = torch.zeros(self.motion_weights.shape[0], dtype=per_bin.dtype, device=per_bin.device)
        return out.index_add_(0, self.bin_motion.long(), per_bin)

    def motion_shares(self) -> torch.Tensor:
        """Each motion's share of the starts ``[num_motions]`` under :meth:`probabilities`."""
        return self._per_motion(self.probabilities())

    def metrics(self) -> dict[str, torch.Tensor]:
        """Device scalars: entropy of the bin distribution normalised by log(num_bins) (1 = uniform over
        bins) and the probability of the most likely bin."""
        p = self.probabilities()
        entropy = -(p * (p + 1e-12).log()).sum() / max(math.log(self.num_bins), 1e-12)
        return {"sampler/entropy": entropy, "sampler/top_bin_prob": p.max()}

    def sample(self, mask: torch.Tensor | wp.array, motion_ids_out: torch.Tensor | wp.array,
               times_out: torch.Tensor | wp.array) -> None:
        """Draw a new (motion int32, time float32) for every env where ``mask [N]`` (bool) is set."""
        n = mask.shape[0]
        if self.rng.shape[0] != n:
            self.rng = rng_states(self.seed, RNG_SAMPLER, n, self.device)
            self.state.rng = warp_view(self.rng, wp.uint32)
        with torch_stream_scope(self.wp_device):
            draw_starts(self.tables, self.state, _wp(mask, wp.bool), _wp(motion_ids_out), _wp(times_out))

    def state_dict(self) -> dict:
        visits = {"motion_visits": self.visits().clone()} if self.cfg.motion_split == "rate" else {}
        return {"failure_ema": self.ema().clone(), **visits, "rng": self.rng.clone()}

    def load_state_dict(self, state: dict) -> None:
        """Restore the failure EMA (and the random streams when the state has them and the env count matches). A
        state with fewer bins comes from a motion set that has since grown by appended motions (the motion-set
        check of the checkpoint has verified the old ones are unchanged): their bins keep their EMA, the new bins
        start at zero, and so do the motions' visits (and all of them for a state saved before they were kept)."""
        ema = state["failure_ema"]
        if ema.shape[0] > self.num_bins:
            raise ValueError(f"sampler state has {ema.shape[0]} bins, this motion set {self.num_bins}")
        self.failure_ema.zero_()
        self.failure_ema[:ema.shape[0]].copy_(ema)
        visits = state.get("motion_visits", self.motion_visits[:0])
        self.motion_visits.zero_()
        self.motion_visits[:visits.shape[0]].copy_(visits[:self.motion_visits.shape[0]])
        self.scale.fill_(1.0)
        self.steps.zero_()
        rng = state.get("rng")
        if rng is not None and rng.shape == self.rng.shape:
            self.rng.copy_(rng)
        self.refresh()
