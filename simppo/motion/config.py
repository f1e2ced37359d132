"""Typed motion config (mirrors ``configs/motion/default.yaml``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from simppo.paths import MOTIONS_DIR, REPO_ROOT

DEFAULT_MOTIONS = MOTIONS_DIR / "g1_sample"


@dataclass
class MotionCfg:
    """Which packed motions to load.

    ``files``: shard files (``*.sms``), pack directories (holding ``index.json``) or pack
    ``index.json`` files. A relative path is looked up in the working directory first, then in the
    simppo repository root (so ``motions/g1_sample`` works from anywhere). Defaults to simppo's
    shipped G1 sample pack.
    """

    files: list[str] = field(default_factory=lambda: ["motions/g1_sample"])
    # all: every rank loads every motion; rank: with several ranks (DDP) each loads only its share of the shards
    # (whole shards, balanced by frames), while motion rows (per-motion exploration) stay global
    chunk: str = "all"

    def resolved_files(self) -> list[str]:
        out = []
        for f in self.files:
            p = Path(f).expanduser()
            if not p.is_absolute() and not p.exists() and (REPO_ROOT / p).exists():
                p = REPO_ROOT / p
            out.append(str(p))
        return out

    def load_index(self, rank: int | None = None, world_size: int | None = None):
        """The :class:`~simppo.motion.index.MotionIndex` this process loads (headers only): every shard, or with
        ``chunk=rank`` this rank's share. ``rank`` / ``world_size`` default to the initialised process group's
        (one rank without one)."""
        from simppo.motion.index import MotionIndex

        if self.chunk not in CHUNK_MODES:
            raise ValueError(f"motion.chunk={self.chunk!r}: choose from {list(CHUNK_MODES)}")
        index = MotionIndex.from_sources(self.resolved_files())
        if self.chunk == "all":
            return index
        if rank is None or world_size is None:
            rank, world_size = process_rank()
        return index.chunk(rank, world_size)


CHUNK_MODES = ("all", "rank")


def process_rank() -> tuple[int, int]:
    """``(rank, world_size)`` of the initialised ``torch.distributed`` process group, else ``(0, 1)``."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1
