"""Collectives of the distributed (DDP) training path, on ``torch.distributed`` directly.

Every rank runs the same code; these helpers are no-ops (or identities) with one process. They call
``torch.distributed`` rather than ``fabric.all_reduce``: Fabric's reduction puts a barrier before each call,
a host sync on NCCL, and the PPO update reduces inside a minibatch step. Tensor collectives here enqueue on the
device (NCCL) or block on the CPU (gloo) and never read a value on the host.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


class DistributedConfigError(ValueError):
    """The ranks were configured differently in a way that would desynchronise them (e.g. ``num_envs``)."""


def world_size(fabric) -> int:
    """Number of processes (1 without a process group, or for a stand-in without ``world_size``)."""
    return int(getattr(fabric, "world_size", 1) or 1)


def global_rank(fabric) -> int:
    return int(getattr(fabric, "global_rank", 0) or 0)


def is_global_zero(fabric) -> bool:
    return bool(getattr(fabric, "is_global_zero", True))


def close_process_group() -> None:
    """Destroy the process group once every rank is done with its collectives (no-op without one): left to the
    interpreter's exit, gloo's worker threads can outlive it and abort the process ("terminate called without an
    active exception", exit status -6) after a run that finished."""
    if dist.is_available() and dist.is_initialized():
        dist.barrier()  # no rank tears the group down while another is still inside a collective of it
        dist.destroy_process_group()


def all_reduce_(t: torch.Tensor, op: str = "sum") -> torch.Tensor:
    """In-place all-reduce of ``t`` over every rank (``op``: ``sum``, ``mean`` or ``max``); returns ``t``.
    Identity without a process group."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return t
    if op == "max":
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    if op == "mean":
        t.div_(dist.get_world_size())
    elif op != "sum":
        raise ValueError(f"all_reduce_: unknown op {op!r}")
    return t


def all_gather_tensor(t: torch.Tensor) -> torch.Tensor:
    """``[world_size, *t.shape]``: ``t`` of every rank, in rank order (``t[None]`` with one process)."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return t.unsqueeze(0)
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, t.contiguous())
    return torch.stack(parts)


def gather_objects(obj, dst: int = 0) -> list | None:
    """``obj`` (picklable; keep tensors on the CPU) of every rank, in rank order, on rank ``dst``; ``None`` on the
    other ranks (``[obj]`` with one process)."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return [obj]
    out = [None] * dist.get_world_size() if dist.get_rank() == dst else None
    dist.gather_object(obj, out, dst=dst)
    return out


def broadcast_object(obj, src: int = 0):
    """``obj`` of rank ``src`` on every rank."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def any_rank(flag: bool, device: torch.device | str = "cpu") -> bool:
    """Whether ``flag`` is true on any rank (one tiny all-reduce and a host read: call it between iterations)."""
    t = torch.tensor([1.0 if flag else 0.0], device=device)
    return bool(all_reduce_(t, "max").item() > 0)


def check_same_on_all_ranks(fabric, values: dict[str, int], fix: str = "") -> None:
    """Raise :class:`DistributedConfigError` on every rank, with the same one-line message, unless every rank
    has the same integer ``values`` (e.g. ``num_envs``, ``num_steps``): the ranks must run the same number of
    minibatch steps and reduce tensors of the same shapes, or they deadlock."""
    if world_size(fabric) == 1:
        return
    local = torch.tensor([int(v) for v in values.values()], dtype=torch.int64, device=fabric.device)
    table = all_gather_tensor(local).cpu()  # set-up time, not a rollout step
    for j, name in enumerate(values):
        column = table[:, j].tolist()
        if len(set(column)) > 1:
            per_rank = ", ".join(f"rank {r}: {v}" for r, v in enumerate(column))
            raise DistributedConfigError(f"the ranks disagree on {name} ({per_rank}); every rank must run the same "
                                         f"number of rollout steps and minibatches{fix}")


def mean_std_all_ranks(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and unbiased std of ``x`` over every rank's values together (float64 sums, one all-reduce, no host
    sync), in ``x``'s dtype."""
    a = x.double()
    sums = all_reduce_(torch.stack([torch.full_like(a[0], a.numel()), a.sum(), a.square().sum()]))
    n = sums[0]
    mean = sums[1] / n
    var = ((sums[2] - n * mean.square()) / (n - 1.0).clamp(min=1.0)).clamp(min=0.0)
    return mean.to(x.dtype), var.sqrt().to(x.dtype)
