"""Device naming shared by torch and Warp."""

import torch
import warp as wp

_warp_ready = False


def init_warp(quiet: bool = True) -> None:
    """Initialise Warp once per process (``quiet`` hides its init and module-load messages)."""
    global _warp_ready
    if not _warp_ready:
        if quiet:
            wp.config.log_level = wp.LOG_WARNING
        wp.init()
        _warp_ready = True


def resolve_device(name: str = "auto") -> str:
    """``auto`` → ``cuda:0`` when torch sees a GPU, else ``cpu``; other names pass through."""
    if name == "auto":
        return "cuda:0" if torch.cuda.is_available() else "cpu"
    if name == "cuda":
        return "cuda:0"
    return name


def warp_device(device: str | torch.device) -> str:
    """Warp's name for a torch device (``cpu`` or ``cuda:N``)."""
    init_warp()
    dev = torch.device(device)
    if dev.type == "cuda":
        return f"cuda:{dev.index or 0}"
    return "cpu"


def warp_view(t: torch.Tensor, dtype=None) -> wp.array:
    """Zero-copy Warp array over a torch tensor (``dtype`` e.g. ``wp.vec3`` folds the last axis)."""
    return wp.from_torch(t, dtype=dtype) if dtype is not None else wp.from_torch(t)
