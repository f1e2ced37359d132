"""Atomic file writes: a temp file in the target's folder, fsync, then ``os.replace``."""

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def _file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write(path: str | os.PathLike, write_fn: Callable[[BinaryIO], None]) -> Path:
    """Call ``write_fn(f)`` on a binary temp file next to ``path``, then move it onto ``path``.

    The parent folder must exist. Readers see the old file or the complete new one; an
    exception (or ``KeyboardInterrupt``) leaves ``path`` untouched and removes the temp file. The new file
    gets the usual umask permissions (``mkstemp`` alone would create it 0600).
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), _file_mode())
            write_fn(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    return atomic_write(path, lambda f: f.write(data))


def atomic_write_text(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> Path:
    return atomic_write_bytes(path, text.encode(encoding))
