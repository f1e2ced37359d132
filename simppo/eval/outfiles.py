"""Output files written by path-taking writers (ffmpeg, the ONNX exporter): a temp file next to the target,
then ``os.replace`` with the usual umask permissions (``mkstemp`` alone would leave them 0600)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def temp_output(path: str | Path) -> Iterator[str]:
    """``with temp_output(path) as tmp: write(tmp)`` → ``path`` appears complete or not at all."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=f".tmp{path.suffix}", dir=path.parent)
    os.close(fd)
    try:
        yield tmp
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
