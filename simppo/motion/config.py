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

    def resolved_files(self) -> list[str]:
        out = []
        for f in self.files:
            p = Path(f).expanduser()
            if not p.is_absolute() and not p.exists() and (REPO_ROOT / p).exists():
                p = REPO_ROOT / p
            out.append(str(p))
        return out
