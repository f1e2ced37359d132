"""Counting Warp's device/host allocations (test helper; ``from tests.sim.warp_allocs import WarpAllocCounter``).

Every Warp array that owns memory is allocated through its device's allocator (``wp.zeros``, ``wp.empty``,
``wp.array``, ``wp.full``, ``wp.clone``, ...; ``wp.from_torch`` views allocate nothing). The counter patches
the ``allocate`` method of Warp's allocator classes and files each call under ``mujoco_warp`` (the call
stack passes through the mujoco_warp package: its internal scratch inside ``step``) or ``simppo`` (anything
else: simppo's own code paths).
"""

from __future__ import annotations

import sys
from collections import Counter

import warp._src.context as wpc

_ALLOCATORS = ("CpuDefaultAllocator", "CpuPinnedAllocator", "CudaDefaultAllocator", "CudaMempoolAllocator")


def _origin() -> tuple[str, str]:
    """(``mujoco_warp`` | ``simppo``, first caller outside Warp as ``file:line``)."""
    frame, where, owner = sys._getframe(2), None, "simppo"
    while frame is not None:
        name = frame.f_code.co_filename
        if "/mujoco_warp/" in name:
            owner = "mujoco_warp"
        if where is None and "/warp/" not in name and "warp_allocs.py" not in name:
            where = f"{name.rsplit('/', 2)[-2]}/{name.rsplit('/', 1)[-1]}:{frame.f_lineno}"
        frame = frame.f_back
    return owner, where or "?"


class WarpAllocCounter:
    """``with WarpAllocCounter(monkeypatch) as c: ...`` then ``c.counts["simppo"]``, ``c.counts["mujoco_warp"]``
    and ``c.sites`` (``Counter`` of ``file:line`` of the simppo-side allocations, for the failure message)."""

    def __init__(self, monkeypatch):
        self.counts: Counter = Counter()
        self.sites: Counter = Counter()
        self.active = False
        for cls_name in _ALLOCATORS:
            cls = getattr(wpc, cls_name, None)
            if cls is None:
                continue
            original = cls.allocate

            def allocate(alloc, size, _orig=original):
                if self.active:
                    owner, where = _origin()
                    self.counts[owner] += 1
                    if owner == "simppo":
                        self.sites[where] += 1
                return _orig(alloc, size)

            monkeypatch.setattr(cls, "allocate", allocate)

    def __enter__(self) -> WarpAllocCounter:
        self.counts.clear()
        self.sites.clear()
        self.active = True
        return self

    def __exit__(self, *exc) -> None:
        self.active = False
