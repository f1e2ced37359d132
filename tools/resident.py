"""Resident memory that building a ``MotionLib`` adds to a fresh Python process (Linux: ``/proc/self/statm``).

A fresh interpreter per measurement: the allocator state of a process that has run other work would blur it."""

from __future__ import annotations

import subprocess
import sys

_SCRIPT = """
import os, sys
from simppo.motion.motion_lib import MotionLib
from simppo.utils.device import init_warp

def resident():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

init_warp()
before = resident()
lib = MotionLib([sys.argv[1]], map_on_cpu=sys.argv[2] == "map")
print(resident() - before, lib.num_frames_total)
"""


def motion_lib_resident_growth(source, mode: str = "map") -> tuple[int, int]:
    """Bytes a fresh process gains by building a CPU ``MotionLib`` of ``source`` (``map``: frames mapped from disk,
    ``copy``: copied into memory), and the library's frame count."""
    out = subprocess.run([sys.executable, "-c", _SCRIPT, str(source), mode], capture_output=True, text=True,
                         timeout=600, check=True).stdout.split()
    return int(out[0]), int(out[1])
