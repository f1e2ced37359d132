"""Atomic, ``weights_only``-safe checkpoint files."""

import os
import tempfile
from pathlib import Path

import torch

CHECKPOINT_FORMAT = "simppo-ppo"


class CheckpointError(RuntimeError):
    """A checkpoint file is missing, truncated, corrupt or not a simppo checkpoint."""


def save_checkpoint(state: dict, path: str | Path) -> None:
    """Write ``state`` to ``path`` via a temp file in the same folder and ``os.replace``.

    An interrupted save leaves the previous file at ``path`` untouched and removes the temp file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict:
    """Load a checkpoint with ``weights_only=True``; raise :class:`CheckpointError` with a one-line reason."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint file not found")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # torch raises many types for truncated/corrupt zips
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"{path}: corrupt or truncated checkpoint ({reason})") from None
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path}: not a simppo checkpoint (missing format '{CHECKPOINT_FORMAT}')")
    for key in ("model", "epoch"):
        if key not in state:
            raise CheckpointError(f"{path}: checkpoint lacks '{key}'")
    return state
