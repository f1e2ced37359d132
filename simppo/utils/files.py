"""Atomic file writes: a temp file in the target's folder, fsync, then ``os.replace``."""

import contextlib
import errno
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
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


def partial_directory(target: str | os.PathLike) -> Path:
    """Where :func:`staged_directory` keeps the resumable work towards ``target``."""
    target = Path(target)
    return target.parent / f".{target.name}.partial"


@contextlib.contextmanager
def staged_directory(target: str | os.PathLike, may_replace: bool = True, resumable: bool = False) -> Iterator[Path]:
    """``with staged_directory(target) as tmp: write everything into tmp`` → ``target`` then holds exactly the new
    contents.

    ``tmp`` is a fresh folder beside ``target`` (``.<name>.tmp-XXXX``); on success an existing ``target`` is moved
    aside, ``tmp`` moved into its place and the old folder deleted. An error or interrupt leaves ``target`` as it
    was and removes ``tmp``. Callers decide beforehand whether ``target`` may be replaced; with ``may_replace=False``
    a ``target`` that appeared meanwhile is kept and :class:`FileExistsError` raised.

    ``resumable``: ``tmp`` is ``.<name>.partial`` beside ``target``, used as it is when it exists and kept on an
    error or interrupt, so that a later run can continue the work in it."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex[:8]
    tmp, old = target.parent / f".{target.name}.tmp-{tag}", target.parent / f".{target.name}.old-{tag}"
    if resumable:
        tmp = partial_directory(target)
    tmp.mkdir(exist_ok=resumable)
    try:
        yield tmp
        if target.exists():
            if not may_replace:
                raise FileExistsError(errno.EEXIST, "appeared while the new contents were written", str(target))
            os.replace(target, old)
            try:
                os.replace(tmp, target)
            except BaseException:
                os.replace(old, target)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
    except BaseException:
        if not resumable:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
