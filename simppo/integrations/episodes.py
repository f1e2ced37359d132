"""Episode statistics of a simppo env as device scalars, for libraries that log them every step."""

from __future__ import annotations

import torch


class EpisodeMeans:
    """Per key of the env's ``extras["episode"]``: a moving mean over the episodes that ended (each ending episode
    weighs ``alpha``), as device scalars, updated every step without a host read. A step with no ending episode
    leaves the means as they are (a per-step mean over ended episodes would be 0/0 there)."""

    def __init__(self, alpha: float = 0.05):
        self.alpha = alpha
        self.means: dict[str, torch.Tensor] = {}
        self._seen: torch.Tensor | None = None

    def update(self, episode: dict[str, torch.Tensor], done: torch.Tensor) -> dict[str, torch.Tensor]:
        """``episode``: key → ``[N]`` totals of the episodes that ended (valid where ``done [N]``); the means."""
        d = done.to(torch.float32)
        count = d.sum()
        if self._seen is None:
            self._seen = self._new(torch.bool, done.device)
        # weight of this step's batch: 1 - (1 - alpha)^count; the first batch replaces the initial zeros
        w = torch.where(self._seen, 1.0 - (1.0 - self.alpha) ** count, (count > 0).to(torch.float32))
        for key, value in episode.items():
            batch = (value.to(torch.float32) * d).sum() / count.clamp(min=1.0)
            mean = self.means.get(key)
            if mean is None:
                mean = self.means[key] = self._new(torch.float32, done.device)
            mean.add_(w * (batch - mean))
        self._seen |= count > 0
        return self.means

    @staticmethod
    def _new(dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """A zero scalar that stays writable outside ``torch.inference_mode()`` even when made inside it (rsl_rl
        steps the env in inference mode; an inference tensor could not be updated in place after it)."""
        with torch.inference_mode(False):
            return torch.zeros((), dtype=dtype, device=device)
