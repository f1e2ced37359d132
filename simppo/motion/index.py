"""Stable row allocation over packed motion shards (API of ProtoMotions' ``ppo.utils.motion_index``).

A :class:`MotionIndex` is an ordered list of shards; motion ``j`` of shard ``s`` owns global row
``s.offset + j``. Offsets are cumulative counts in shard order, so appending a shard never moves the
rows of the shards before it — per-motion training state (e.g. a per-motion log-std table) keyed by
row stays valid when the motion set grows. Each shard carries the digest of its motion names, so a
checkpoint's rows can be validated against the motions actually loaded.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from simppo.motion.format import SHARD_SUFFIX, ShardFormatError, ShardHeader, names_digest, read_header

INDEX_FILE = "index.json"
PACK_FORMAT = "simppo-motion-pack"

__all__ = ["INDEX_FILE", "MotionIndex", "MotionShard", "assign_shards", "names_digest", "read_pack_index",
           "resolve_shard_paths"]


@dataclass
class MotionShard:
    """One shard's rows: ``[offset, offset + count)``; ``names_digest`` of its motion names in order."""

    path: str
    offset: int
    count: int
    names_digest: str


def assign_shards(frames: list[int], world_size: int) -> list[list[int]]:
    """Shard indices per rank, balanced by frames: the largest shard first goes to the rank with the fewest
    frames so far (ties: the lower shard index, the lower rank), every rank's list in index order. Deterministic,
    so every rank computes the same split from the same headers. Needs ``len(frames) >= world_size`` for every
    rank to get a shard."""
    totals = [0] * world_size
    ranks: list[list[int]] = [[] for _ in range(world_size)]
    for i in sorted(range(len(frames)), key=lambda i: (-frames[i], i)):
        r = min(range(world_size), key=lambda r: (totals[r], len(ranks[r]), r))
        ranks[r].append(i)
        totals[r] += frames[i]
    return [sorted(r) for r in ranks]


def read_pack_index(index_path: Path) -> dict:
    """The decoded ``index.json`` of a pack, checked: a simppo pack index whose ``shards`` name files inside the
    pack's folder (a name that leads elsewhere, ``../x`` or an absolute path, is refused)."""
    index_path = Path(index_path)
    try:
        d = json.loads(index_path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ShardFormatError(f"{index_path}: unreadable pack index ({reason})") from None
    if not isinstance(d, dict) or d.get("format") != PACK_FORMAT:
        raise ShardFormatError(f"{index_path}: not a simppo motion pack index")
    shards = d.get("shards")
    if not isinstance(shards, list) or not all(isinstance(s, dict) and isinstance(s.get("file"), str)
                                               for s in shards):
        raise ShardFormatError(f"{index_path}: corrupt pack index ('shards' must list {{file: name}} objects)")
    folder = index_path.parent.resolve()
    for s in shards:
        f = Path(s["file"])
        if not s["file"] or f.is_absolute() or ".." in f.parts or folder not in (folder / f).resolve().parents:
            raise ShardFormatError(f"{index_path}: shard {s['file']!r} is outside the pack's folder; an index may "
                                   "name only files inside it")
    return d


def _read_pack_index(index_path: Path) -> list[Path]:
    return [(index_path.parent / s["file"]).resolve() for s in read_pack_index(index_path)["shards"]]


def resolve_shard_paths(sources) -> list[Path]:
    """Expand sources (shard files, pack directories holding ``index.json``, index files) to shard paths.

    A directory without ``index.json`` contributes its ``*.sms`` files in sorted order.
    """
    if isinstance(sources, str | os.PathLike):
        sources = [sources]
    out: list[Path] = []
    for src in sources:
        p = Path(src).expanduser()
        if p.is_dir():
            if (p / INDEX_FILE).is_file():
                out.extend(_read_pack_index(p / INDEX_FILE))
            else:
                found = sorted(p.glob(f"*{SHARD_SUFFIX}"))
                if not found:
                    raise ShardFormatError(f"{p}: no {INDEX_FILE} and no *{SHARD_SUFFIX} shard files")
                out.extend(f.resolve() for f in found)
        elif p.suffix == ".json":
            out.extend(_read_pack_index(p))
        else:
            if not p.exists():
                raise ShardFormatError(f"{p}: no such motion source")
            out.append(p.resolve())
    return out


@dataclass
class MotionIndex:
    """Shards and their rows. A chunk (:meth:`chunk`) holds some shards of a ``whole`` index with their global
    offsets, so rows stay global while a rank loads only its share."""

    shards: list[MotionShard]
    _headers: dict = field(default_factory=dict, repr=False, compare=False)
    whole_index: MotionIndex | None = field(default=None, repr=False, compare=False)  # None: this is the whole
    rank_shards: list[list[int]] | None = field(default=None, repr=False, compare=False)  # whole's shards per rank

    @property
    def num_motions(self) -> int:
        return sum(s.count for s in self.shards)

    @property
    def whole(self) -> MotionIndex:
        """The index every rank shares (``self`` unless this is a chunk): its rows number every motion."""
        return self.whole_index if self.whole_index is not None else self

    def chunk(self, rank: int, world_size: int) -> MotionIndex:
        """Rank ``rank``'s share of this index's shards (:func:`assign_shards`, balanced by frames), keeping
        their global offsets; ``self`` with one rank. Raises :class:`ShardFormatError` when there are fewer
        shards than ranks."""
        if world_size <= 1:
            return self
        if len(self.shards) < world_size:
            raise ShardFormatError(
                f"{self.shards[0].path if self.shards else 'motion.files'}: motion.chunk=rank gives every rank whole "
                f"shards, and the motions hold {len(self.shards)} shard(s) for {world_size} ranks; re-pack with "
                "simppo-pack --max-motions-per-shard N so that there are at least as many shards as ranks "
                "(or use motion.chunk=all)")
        frames = [self.header(i).num_frames for i in range(len(self.shards))]
        ranks = assign_shards(frames, world_size)
        out = MotionIndex([self.shards[i] for i in ranks[rank]], whole_index=self, rank_shards=ranks)
        out._headers = self._headers  # one header cache for the whole and its chunks
        return out

    def chunk_state(self) -> dict:
        """Plain types naming how the motions are split over the ranks: ``{"mode": "all"}``, or ``{"mode":
        "rank", "world_size", "rank_shards"}`` (indices into the whole index's shards, per rank)."""
        if self.rank_shards is None:
            return {"mode": "all"}
        return {"mode": "rank", "world_size": len(self.rank_shards), "rank_shards": [list(r) for r in self.rank_shards]}

    def state_dict(self) -> dict:
        """Plain Python types only (safe for ``torch.load(weights_only=True)``)."""
        return {"shards": [asdict(s) for s in self.shards], "num_motions": self.num_motions}

    @classmethod
    def from_state_dict(cls, state: dict) -> MotionIndex:
        return cls([MotionShard(**s) for s in state["shards"]])

    def header(self, i: int) -> ShardHeader:
        """Header of shard ``i`` (read once, then cached)."""
        path = self.shards[i].path
        if path not in self._headers:
            self._headers[path] = read_header(path)
        return self._headers[path]

    def offset_for(self, motion_lib) -> int:
        """Row offset of ``motion_lib``'s motions inside this index.

        The lib's shards must appear in this index as a consecutive run with identical motion-name
        digests and counts; raises ``ValueError`` otherwise.
        """
        lib_shards = MotionIndex.build(motion_lib).shards
        n = len(lib_shards)
        if n == 0:
            raise ValueError("motion lib has no shards")
        for i in range(len(self.shards) - n + 1):
            run = self.shards[i : i + n]
            if all(
                a.names_digest == b.names_digest and a.count == b.count for a, b in zip(run, lib_shards, strict=False)
            ):
                return run[0].offset
        raise ValueError(
            "the loaded motions are not part of this motion index (names digest mismatch): "
            f"lib digests {[s.names_digest[:12] for s in lib_shards]}, "
            f"index digests {[s.names_digest[:12] for s in self.shards]}"
        )

    def extend(self, sources) -> MotionIndex:
        """A new index with the shards of ``sources`` appended; existing rows keep their offsets."""
        more = MotionIndex.from_sources(sources)
        base = self.num_motions
        shards = list(self.shards) + [
            MotionShard(s.path, base + s.offset, s.count, s.names_digest) for s in more.shards
        ]
        idx = MotionIndex(shards)
        idx._headers.update(self._headers)
        idx._headers.update(more._headers)
        return idx

    @classmethod
    def from_sources(cls, sources) -> MotionIndex:
        """Index shard files, pack directories or pack index files, reading each shard's header once.

        Never loads poses: only the fixed-size preamble and JSON header of each shard are read.
        """
        shards: list[MotionShard] = []
        headers: dict[str, ShardHeader] = {}
        offset = 0
        for p in resolve_shard_paths(sources):
            key = str(p)
            h = headers.get(key) or read_header(p)
            headers[key] = h
            shards.append(MotionShard(key, offset, len(h.motions), h.names_digest))
            offset += len(h.motions)
        idx = cls(shards)
        idx._headers.update(headers)
        return idx

    @classmethod
    def build(cls, motion_lib) -> MotionIndex:
        """The index of exactly the shards a loaded :class:`~simppo.motion.motion_lib.MotionLib` holds."""
        idx = getattr(motion_lib, "index", None)
        if not isinstance(idx, MotionIndex):
            raise TypeError("MotionIndex.build expects a MotionLib (with an .index)")
        out = cls([MotionShard(s.path, s.offset, s.count, s.names_digest) for s in idx.shards])
        out._headers.update(idx._headers)
        return out
