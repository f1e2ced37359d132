#!/usr/bin/env python
"""Motion-library benchmarks.

    python benchmarks/motion.py [--device auto] [--envs 8192] [--future 5] [--pack-frames 20000]

1. ``simppo-pack`` throughput (frames/s) on G1 clips (CSV and NPZ inputs; FK + velocities + contacts).
2. ``MotionIndex.from_sources`` open time vs pack size (1e3 .. 1e6 frames; sparse shard files).
3. ``MotionLib.get_motion_state`` throughput for N envs x (1 + K) time slots on the chosen device.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import warp as wp

from simppo.motion import DEFAULT_MOTIONS, MotionIndex, MotionLib
from simppo.motion.format import MotionMeta, ShardHeader, write_shard
from simppo.motion.pack import pack_motions
from simppo.paths import MOTIONS_DIR
from simppo.utils.device import resolve_device


def bench_pack(tmp: Path, target_frames: int) -> None:
    base = [np.loadtxt(p, delimiter=",") for p in sorted(MOTIONS_DIR.glob("*.csv"))]  # the shipped clips
    src = tmp / "src"
    src.mkdir()
    files_csv, files_npz, frames = [], [], 0
    k = 0
    while frames < target_frames:
        rows = base[k % len(base)]
        p = src / f"clip{k:04d}.csv"
        np.savetxt(p, rows, delimiter=",", fmt="%.6f")
        files_csv.append(p)
        q = src / f"clip{k:04d}.npz"
        np.savez(q, fps=30.0, qpos=rows)
        files_npz.append(q)
        frames += rows.shape[0]
        k += 1
    for kind, files in (("csv", files_csv), ("npz", files_npz)):
        t0 = time.perf_counter()
        res = pack_motions(files, tmp / f"pack_{kind}", robot="g1")
        dt = time.perf_counter() - t0
        print(
            f"pack  {kind}: {res.num_motions} clips, {res.num_frames} frames in {dt:.2f} s "
            f"-> {res.num_frames / dt:,.0f} frames/s"
        )


def bench_open(tmp: Path) -> None:
    joints = [f"j{i}" for i in range(29)]
    bodies = [f"b{i}" for i in range(30)]
    for total in (1_000, 10_000, 100_000, 1_000_000):
        per = total // 10
        d = tmp / f"open_{total}"
        d.mkdir()
        metas = [MotionMeta(f"m{i}", 30.0, i * per, per) for i in range(10)]
        write_shard(d / "shard_00000.sms", ShardHeader("g1", joints, bodies, ["b6", "b12"], metas), None)
        best = float("inf")
        for _ in range(20):
            t0 = time.perf_counter()
            MotionIndex.from_sources([d / "shard_00000.sms"])
            best = min(best, time.perf_counter() - t0)
        size = (d / "shard_00000.sms").stat().st_size
        print(f"open  {total:>9,} frames ({size / 2**20:8.1f} MiB sparse): {best * 1e3:.3f} ms")


def bench_state(device: str, envs: int, future: int, iters: int) -> None:
    t0 = time.perf_counter()
    lib = MotionLib([str(DEFAULT_MOTIONS)], device=device)
    print(
        f"load  shipped pack ({lib.num_motions} motions, {lib.num_frames_total} frames) on {device}: "
        f"{(time.perf_counter() - t0) * 1e3:.1f} ms"
    )
    out = lib.alloc_state(envs, future)
    offs = torch.arange(1, future + 1, dtype=torch.float32, device=device) * 0.1
    ids = lib.sample_motions(envs)
    times = lib.sample_times(ids)
    lib.get_motion_state(ids, times, offs, out=out)  # compile / load the kernel
    wp.synchronize_device(lib.wp_device)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        lib.get_motion_state(ids, times, offs, out=out)
    wp.synchronize_device(lib.wp_device)
    dt = (time.perf_counter() - t0) / iters
    F = future + 1
    print(
        f"state {envs} envs x {F} slots ({lib.num_bodies} bodies, {lib.num_dofs} dofs) on {device}: "
        f"{dt * 1e3:.3f} ms/call -> {envs / dt:,.0f} env-queries/s, {envs * F / dt:,.0f} frames/s"
    )
    t0 = time.perf_counter()
    for _ in range(iters):
        i = lib.sample_motions(envs, out=ids)
        lib.sample_times(i, out=times)
    wp.synchronize_device(lib.wp_device)
    print(f"sample motions+times for {envs} envs: {(time.perf_counter() - t0) / iters * 1e3:.3f} ms/call")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--envs", type=int, default=8192)
    ap.add_argument("--future", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--pack-frames", type=int, default=20_000)
    args = ap.parse_args()
    device = resolve_device(args.device)
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        bench_pack(tmp, args.pack_frames)
        bench_open(tmp)
    bench_state(device, args.envs, args.future, args.iters)


if __name__ == "__main__":
    main()
