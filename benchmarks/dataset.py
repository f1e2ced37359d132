#!/usr/bin/env python
"""Motion data at dataset scale: one run, figures side by side.

    python benchmarks/dataset.py [--motions 10000] [--envs 4096] [--eval-motions 1000] [--out DIR]

A set of ``--motions`` clips made by ``tools/make_motion_set.py`` from the shipped ones (time-warped, turned,
moved, perturbed) is packed and used:
1. ``simppo-pack`` frames/s with one worker (a sample of the set) and with every core (the whole set);
2. ``MotionIndex`` open time; ``MotionLib`` build time, bytes per frame and the resident memory it adds to a
   fresh process (CPU: the frames are mapped) against the pack's size;
3. per env step at ``--envs`` envs: ``get_motion_state`` (1 + 4 future slots) and the adaptive sampler's update +
   sample, over the whole set against the 6 shipped motions (ratio: the cost of the motion count);
4. ``simppo-train`` on the whole set: time and peak resident memory to its first iteration;
5. ``simppo-eval`` of that checkpoint on ``--eval-motions`` of the set: rounds and motions per second.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import warp as wp
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simppo.envs.imitation.sampler import AdaptiveSampler, AdaptiveSamplingCfg  # noqa: E402
from simppo.motion import DEFAULT_MOTIONS, MotionIndex, MotionLib  # noqa: E402
from simppo.motion.pack import PackOptions, pack_motions  # noqa: E402
from simppo.motion.shard_jobs import default_workers  # noqa: E402
from tools.make_motion_set import make_motion_set  # noqa: E402
from tools.resident import motion_lib_resident_growth  # noqa: E402


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    return f"{os.cpu_count()} cores {cpu}; torch {torch.__version__}"


def per_step(fn, iters: int) -> float:
    fn()
    wp.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    wp.synchronize()
    return (time.perf_counter() - t0) / iters


def query_costs(pack: str, envs: int, iters: int, among: int | None = None) -> dict[str, float]:
    """Per-step costs over ``pack``; ``among``: the envs play only its first ``among`` motions (the same tables,
    the data of a few motions: what the count alone costs)."""
    lib = MotionLib([pack], device="cpu")
    out = lib.alloc_state(envs, 4)
    offsets = torch.tensor([0.02, 0.04, 0.08, 0.16])
    ids = lib.sample_motions(envs)
    if among is not None:
        ids = ids % among
    times = lib.sample_times(ids)
    state = per_step(lambda: lib.get_motion_state(ids, times, offsets, out=out), iters)
    sampler = AdaptiveSampler(lib.motion_lengths.tolist(), lib.motion_weights, AdaptiveSamplingCfg(), 0.1, "cpu",
                              num_envs=envs)
    term, mask = torch.rand(envs) < 0.01, torch.rand(envs) < 0.02
    times32, ids = times.float().clone(), ids.int().contiguous()

    def sampler_step():
        sampler.update(ids, times32, term)
        sampler.sample(mask, ids, times32)

    return {"motions": lib.num_motions, "get_motion_state_ms": 1e3 * state,
            "sampler_ms": 1e3 * per_step(sampler_step, iters)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--motions", type=int, default=10_000)
    ap.add_argument("--envs", type=int, default=4096)
    ap.add_argument("--eval-motions", type=int, default=1000)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--out", default=None, help="working folder (default: a temporary one, removed)")
    args = ap.parse_args()
    work = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="simppo_dataset_"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"machine: {machine()}; {args.motions} motions; work: {work}", flush=True)
    report = {"machine": machine(), "motions": args.motions}

    manifest = make_motion_set(work / "clips", args.motions)
    sample = work / "sample.yaml"
    entries = yaml.safe_load(manifest.read_text())["motions"][:max(1, min(200, args.motions // 10))]
    sample.write_text(yaml.safe_dump({"motions": [{**e, "file": str(manifest.parent / e["file"])}
                                                                for e in entries]}))
    t0 = time.perf_counter()
    one = pack_motions([str(sample)], work / "pack_sample", force=True, opts=PackOptions(workers=1))
    per_worker = one.num_frames / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    full = pack_motions([str(manifest)], work / "pack", force=True, opts=PackOptions(workers=None))
    total = full.num_frames / (time.perf_counter() - t0)
    size = sum(p.stat().st_size for p in full.shards)
    report["pack"] = {"frames": full.num_frames, "shards": len(full.shards), "bytes": size,
                      "frames_per_s_one_worker": per_worker, "frames_per_s_all": total, "workers": default_workers()}
    print(f"pack: {full.num_frames:,} frames in {len(full.shards)} shards ({size / 2**20:.0f} MiB); "
          f"{per_worker:,.0f} frames/s with one worker, {total:,.0f} with {default_workers()} "
          f"({total / per_worker:.2f}x)", flush=True)

    t0 = time.perf_counter()
    MotionIndex.from_sources([str(work / "pack")])
    opened = time.perf_counter() - t0
    t0 = time.perf_counter()
    lib = MotionLib([str(work / "pack")], device="cpu")
    built = time.perf_counter() - t0
    grown, _ = motion_lib_resident_growth(work / "pack")
    report["library"] = {"index_open_s": opened, "build_s": built, "bytes_per_frame": lib.bytes_per_frame,
                         "resident_added_bytes": grown, "pack_bytes": size}
    print(f"index open {opened * 1e3:.1f} ms; MotionLib (CPU, mapped) built in {built:.2f} s (the first time: the "
          f"frames file is written), {lib.bytes_per_frame} bytes per frame; a fresh process gains "
          f"{grown / 2**20:.1f} MiB resident for a {size / 2**20:.0f} MiB pack ({grown / size:.1%})", flush=True)
    del lib

    big, small = query_costs(str(work / "pack"), args.envs, args.iters), query_costs(str(DEFAULT_MOTIONS),
                                                                                      args.envs, args.iters)
    few = query_costs(str(work / "pack"), args.envs, args.iters, among=small["motions"])
    spread = {m: query_costs(str(work / "pack"), args.envs, args.iters, among=m)["get_motion_state_ms"]
              for m in (100, 1000) if m < big["motions"]}
    report["per_step"] = {"big": big, "small": small, "big_few_played": few}
    for key, what in (("get_motion_state_ms", "get_motion_state"), ("sampler_ms", "sampler update + sample")):
        print(f"{what} at {args.envs} envs: {big[key]:.3f} ms over {big['motions']:,} motions, {small[key]:.3f} ms "
              f"over {small['motions']} ({big[key] / small[key]:.2f}x)", flush=True)
    state = "get_motion_state_ms"
    print(f"get_motion_state with the {big['motions']:,}-motion set loaded but the envs on {small['motions']} of its "
          f"motions: {few[state]:.3f} ms ({few[state] / small[state]:.2f}x the {small['motions']}-motion set: the "
          f"count's own cost; {big[state] / few[state]:.2f}x from the envs reading {args.envs} scattered clips "
          "instead of a few cached ones, a cost bounded by the number of envs)", flush=True)
    print("get_motion_state with the envs on the first " + ", ".join(
        f"{m:,} motions {ms:.3f} ms" for m, ms in spread.items()) + f", on all {big['motions']:,} {big[state]:.3f} ms "
        "(the cost grows with the distinct clips the envs read, at most one per env)", flush=True)
    report["per_step"]["spread_ms"] = spread

    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "WANDB_MODE": "disabled"}
    t0 = time.perf_counter()
    proc = subprocess.run([str(bin_dir / "simppo-train"), f"motion.files=[{work / 'pack'}]", "max_epochs=1",
                           "logger=none", "progress_bar=false", "eval_every=0", f"run_dir={work / 'run'}"],
                          capture_output=True, text=True, env=env)
    first = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"simppo-train failed: {proc.stderr[-2000:]}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    report["train"] = {"first_iteration_s": first, "peak_resident_bytes": peak}
    print(f"simppo-train on the whole set: {first:.1f} s to its first iteration (start-up included), peak resident "
          f"{peak / 2**30:.2f} GiB", flush=True)

    n_eval = min(args.eval_motions, args.motions)
    eval_pack = work / "pack_eval"
    eval_entries = yaml.safe_load(manifest.read_text())["motions"][:n_eval]
    (work / "eval.yaml").write_text(yaml.safe_dump(
        {"motions": [{**e, "file": str(manifest.parent / e["file"])} for e in eval_entries]}))
    pack_motions([str(work / "eval.yaml")], eval_pack, force=True, opts=PackOptions(workers=None))
    t0 = time.perf_counter()
    proc = subprocess.run([str(bin_dir / "simppo-eval"), f"checkpoint={work / 'run' / 'last.ckpt'}",
                           f"motion.files=[{eval_pack}]", f"out={work / 'eval'}", "force=true", "plot=false"],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"simppo-eval failed: {proc.stderr[-2000:]}")
    played = time.perf_counter() - t0
    ev = json.loads((work / "eval" / "eval.json").read_text())
    rounds = -(-n_eval // ev["num_envs"])
    report["eval"] = {"motions": n_eval, "num_envs": ev["num_envs"], "rounds": rounds, "seconds": played}
    print(f"simppo-eval of {n_eval} motions on {ev['num_envs']} envs: {rounds} rounds in {played:.1f} s "
          f"({rounds / played:.2f} rounds/s, {n_eval / played:.1f} motions/s, start-up included)", flush=True)
    (work / "report.json").write_text(json.dumps(report, indent=2))
    print(f"report: {work / 'report.json'}")


if __name__ == "__main__":
    main()
