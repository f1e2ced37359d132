"""Frames of a motion set mapped from disk instead of copied into memory (the CPU path of ``MotionLib``).

The interpolation kernel reads each field as one array over the frames of every loaded motion. A pack of one shard
is mapped as it is (copy-on-write, read only in practice). A pack of several shards is concatenated once into a
frames file in the cache folder (``$SIMPPO_CACHE_DIR``, else ``$XDG_CACHE_HOME/simppo``, else
``~/.cache/simppo``; ``motion_frames/<digest>.frames``), written by streaming reads and atomically renamed, and
reused while the shards are unchanged (the digest covers their paths, sizes, modification times and fields'
checksums). Either way only the pages the env touches become resident.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from simppo.motion.format import ALIGN, Shard
from simppo.utils.files import atomic_write


def cache_dir() -> Path:
    base = os.environ.get("SIMPPO_CACHE_DIR")
    if base:
        return Path(base).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "simppo"


def _digest(shards: list[Shard], names: list[str]) -> str:
    h = hashlib.sha256()
    for sh in shards:
        st = os.stat(sh.path)
        h.update(json.dumps([str(Path(sh.path).resolve()), st.st_size, st.st_mtime_ns,
                             [sh.header.fields[n].get("crc32") for n in names]]).encode())
    return h.hexdigest()[:32]


def _layout(shards: list[Shard], names: list[str]) -> dict[str, tuple[int, np.dtype, tuple[int, ...]]]:
    """Offset, dtype and shape of each field's concatenation in a frames file."""
    total = sum(sh.header.num_frames for sh in shards)
    out, offset = {}, 0
    for n in names:
        f = shards[0].header.fields[n]
        dtype, shape = np.dtype(f["dtype"]), (total,) + tuple(f["shape"][1:])
        out[n] = (offset, dtype, shape)
        offset += -(-int(np.prod(shape, dtype=np.int64)) * dtype.itemsize // ALIGN) * ALIGN
    return out


def _map(path, offset: int, dtype, shape) -> np.ndarray:
    if int(np.prod(shape, dtype=np.int64)) == 0:
        return np.zeros(shape, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="c", offset=offset, shape=shape)


def map_frames(shards: list[Shard], names: list[str]) -> tuple[dict[str, np.ndarray], str]:
    """Field name → array ``[total frames, ...]`` mapped from disk, and the file mapped. The shards' fields must
    have been verified (:meth:`Shard.verified_chunks`)."""
    if len(shards) == 1:
        sh = shards[0]
        return {n: _map(sh.path, int(sh.header.fields[n]["offset"]), np.dtype(sh.header.fields[n]["dtype"]),
                        tuple(sh.header.fields[n]["shape"])) for n in names}, sh.path
    layout = _layout(shards, names)
    path = cache_dir() / "motion_frames" / f"{_digest(shards, names)}.frames"
    size = max(off + int(np.prod(shape, dtype=np.int64)) * dt.itemsize for off, dt, shape in layout.values())
    if not (path.is_file() and path.stat().st_size == size):
        path.parent.mkdir(parents=True, exist_ok=True)

        def write(fh) -> None:
            for n in names:
                offset, dtype, _ = layout[n]
                fh.seek(offset)
                for sh in shards:
                    for _, chunk in sh.verified_chunks(n):
                        fh.write(chunk.data)
            fh.truncate(size)

        atomic_write(path, write)
    return {n: _map(path, *layout[n]) for n in names}, str(path)
