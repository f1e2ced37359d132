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
        with open(tmp, "rb") as written:  # durable before it replaces anything, as utils.files.atomic_write
            os.fsync(written.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


#: Every name simppo-eval writes into its output folder: ``force=true`` replaces only a folder holding these.
EVAL_OUTPUT_NAMES = ("eval.json", "eval.csv", "eval_errors.png", "curves.png", "failed_motions.yaml",
                     "failed_motions", "videos")


class OutputFolderError(ValueError):
    """``out`` cannot take the outputs as asked (one line)."""


def check_output_folder(out: Path, force: bool, owned: tuple[str, ...] = EVAL_OUTPUT_NAMES) -> None:
    """Raise :class:`OutputFolderError` unless a set of outputs may go to ``out``: it is absent or empty, or
    ``force`` is set and it holds nothing but ``owned`` names (the outputs of an earlier run of the same tool)."""
    if out.exists() and not out.is_dir():
        raise OutputFolderError(f"out={out}: exists and is not a directory")
    entries = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    if not entries:
        return
    if not force:
        raise OutputFolderError(f"out={out}: exists and is not empty (pass force=true to replace the outputs there, "
                                "or choose another out)")
    foreign = [n for n in entries if n not in owned]
    if foreign:
        raise OutputFolderError(f"out={out}: holds {foreign[0]!r}, which this tool did not write; force=true replaces "
                                "only a folder of its outputs: choose another out")
