"""Device naming shared by torch, Warp and Fabric, and the torch ↔ Warp stream ordering.

Every boundary (CLI, env, sim, motion library, Fabric) takes a device name through :func:`resolve_device`,
so ``"cuda"``, ``torch.device("cuda", 1)`` and ``"cuda:1"`` all become one canonical string (``cpu`` or
``cuda:N``): tensors made on ``cuda`` report ``cuda:0``, and ``torch.device("cuda") != torch.device("cuda:0")``.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import sys
import warnings

import torch
import warp as wp

_warp_ready = False
_NULL_SCOPE = contextlib.nullcontext()
_streams: dict[tuple[str, int], wp.Stream] = {}


_NO_DRIVER = "Could not find or load the NVIDIA CUDA driver"


def _init_without_driver_warning() -> None:
    """``wp.init()`` with Warp's native "no CUDA driver" line dropped from stderr (printed by its C library, so
    caught at the file-descriptor level); every other line it prints is passed on."""
    import tempfile

    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            wp.init()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            text = captured.read().decode("utf-8", "replace")
    rest = "".join(line for line in text.splitlines(keepends=True) if _NO_DRIVER not in line)
    if rest:
        sys.stderr.write(rest)
        sys.stderr.flush()


def init_warp(quiet: bool = True) -> None:
    """Initialise Warp once per process (``quiet`` hides its init and module-load messages). On a machine
    without CUDA, Warp's warning that it found no CUDA driver is not shown: CPU is then the expected device."""
    global _warp_ready
    if not _warp_ready:
        if quiet:
            wp.config.log_level = wp.LOG_WARNING
        if torch.cuda.is_available():
            wp.init()
        else:
            _init_without_driver_warning()
        _warp_ready = True


def local_rank() -> int:
    """This process's rank on its node (``LOCAL_RANK`` as set by torchrun / Fabric; 0 when unset)."""
    return int(os.environ.get("LOCAL_RANK", "0") or 0)


def resolve_device(name: str | torch.device = "auto") -> str:
    """The canonical device name, ``cpu`` or ``cuda:N``.

    ``auto`` → ``cuda:<local rank>`` when torch sees a GPU, else ``cpu``; ``cuda`` → torch's current CUDA
    device (``cuda:0`` when CUDA is not available, so names stay comparable on CPU machines);
    ``cuda:N`` / ``cpu`` (strings or :class:`torch.device`) pass through. Anything else raises
    ``ValueError`` naming the value."""
    if isinstance(name, str) and name == "auto":
        if torch.cuda.is_available():
            return f"cuda:{local_rank() % max(torch.cuda.device_count(), 1)}"
        return "cpu"
    try:
        dev = torch.device(name)
    except (RuntimeError, TypeError):
        raise ValueError(f"device={name!r}: expected 'auto', 'cpu', 'cuda' or 'cuda:N'") from None
    if dev.type == "cpu":
        return "cpu"
    if dev.type != "cuda":
        raise ValueError(f"device={name!r}: simppo runs on 'cpu' or CUDA ('cuda', 'cuda:N'), not {dev.type}")
    if dev.index is None:
        return f"cuda:{torch.cuda.current_device() if torch.cuda.is_available() else 0}"
    return f"cuda:{dev.index}"


def warp_device(device: str | torch.device) -> str:
    """Warp's name for a torch device (``cpu`` or ``cuda:N``; same index as :func:`resolve_device`)."""
    init_warp()
    return resolve_device(device)


def warp_view(t: torch.Tensor, dtype=None) -> wp.array:
    """Zero-copy Warp array over a torch tensor (``dtype`` e.g. ``wp.vec3`` folds the last axis).
    Initialises Warp first, so envs and kernels that bind their buffers with it work standalone."""
    init_warp()
    return wp.from_torch(t, dtype=dtype) if dtype is not None else wp.from_torch(t)


# ----------------------------------------------------------------------------- streams
def torch_stream_scope(device: str | torch.device | wp.Device):
    """Context manager: Warp work inside it goes on torch's current CUDA stream of ``device``.

    Makes the ordering between torch ops and Warp launches explicit (``ctrl``, reference times and
    observations are written by one side and read by the other), also under a side stream, CUDA graphs
    of the policy or ``torch.compile``. A no-op on CPU and when Warp already uses that stream (nested
    scopes). No host synchronisation: entering records an event on the previous Warp stream and makes
    torch's stream wait for it on the device."""
    if isinstance(device, str) and device == "cpu":
        return _NULL_SCOPE
    dev = wp.get_device(device) if isinstance(device, wp.Device) else None
    name = str(dev) if dev is not None else resolve_device(device)
    if not name.startswith("cuda"):
        return _NULL_SCOPE
    torch_stream = torch.cuda.current_stream(name)
    key = (name, int(torch_stream.cuda_stream))
    stream = _streams.get(key)
    if stream is None:
        stream = _streams[key] = wp.stream_from_torch(torch_stream)
    if wp.get_device(name).stream.cuda_stream == stream.cuda_stream:
        return _NULL_SCOPE
    return wp.ScopedStream(stream)


@contextlib.contextmanager
def gc_paused():
    """Python's garbage collector off inside the block, its previous state restored after: a collection during a
    graph capture could free memory the graph records (mjlab pauses it the same way)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def on_torch_stream(method):
    """Decorator for methods of objects with a ``device``: run the method inside :func:`torch_stream_scope`."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with torch_stream_scope(self.device):
            return method(self, *args, **kwargs)

    return wrapper


# ----------------------------------------------------------------------------- set-up
def enable_tf32(device: str | torch.device) -> None:
    """On CUDA: TF32 tensor cores for float32 matmuls (the policy's MLPs; cuDNN convolutions use TF32 by
    default); no-op on CPU."""
    if resolve_device(device).startswith("cuda"):
        torch.set_float32_matmul_precision("high")


def fabric_for(device: str | torch.device, devices: int = 1, num_nodes: int = 1, timeout_s: float | None = None,
               **kwargs):
    """A Lightning ``Fabric`` whose ``fabric.device`` is ``device`` (``Fabric(devices=1)`` always means
    ``cuda:0``; a list of indices picks the GPU). ``kwargs`` go to ``Fabric`` (default precision 32-true).

    ``devices`` processes per node on ``num_nodes`` nodes (more than one in all): DDP (``strategy=ddp``) over
    gloo on the CPU or NCCL on CUDA, each rank on ``cuda:<local rank>`` (or the CPU), with ``timeout_s`` for
    every collective (a rank that waits longer for a lost peer fails). ``fabric.launch()`` then starts the
    other local ranks, or joins a torchrun / SLURM launch (Fabric reads their environment variables)."""
    from lightning_fabric import Fabric

    name = resolve_device(device)
    kwargs.setdefault("precision", "32-true")
    if devices * num_nodes > 1:
        from datetime import timedelta

        from lightning_fabric.strategies import DDPStrategy

        cpu = name == "cpu"
        timeout = timedelta(seconds=timeout_s) if timeout_s is not None else None
        strategy = DDPStrategy(process_group_backend="gloo" if cpu else "nccl",
                               **({"timeout": timeout} if timeout is not None else {}))
        return Fabric(accelerator="cpu" if cpu else "cuda", devices=devices, num_nodes=num_nodes, strategy=strategy,
                      **kwargs)
    if name == "cpu":
        return Fabric(accelerator="cpu", devices=1, **kwargs)
    return Fabric(accelerator="cuda", devices=[int(name.split(":")[1])], **kwargs)


def graph_capture_available(wp_device: str, requested: bool = True, what: str = "MJWarp") -> bool:
    """Whether ``wp_device`` can capture Warp work as CUDA graphs: a CUDA device whose Warp memory pool is
    enabled (mujoco_warp allocates inside ``step``; stream-ordered pool allocations are what a graph can
    hold). Warns once, with the fix, when capture is requested on CUDA but the pool is off."""
    init_warp()
    dev = wp.get_device(wp_device)
    if not (requested and dev.is_cuda):
        return False
    if wp.is_mempool_enabled(dev):
        return True
    why = ("memory pools are not supported on this GPU/driver" if not wp.is_mempool_supported(dev)
           else f"Warp's memory pool is disabled (enable it with wp.set_mempool_enabled('{dev}', True))")
    warnings.warn(f"{what} on {dev}: CUDA graph capture is off because {why}; running the launches eagerly "
                  "(slower). Set sim.use_cuda_graph=false to silence this.", RuntimeWarning, stacklevel=3)
    return False
