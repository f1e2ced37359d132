"""Evaluation outputs: ``eval.json``, ``eval.csv``, a per-motion error bar chart, the failed-motions
manifest (``simppo-pack`` input) and the stdout summary table. Every file is written atomically."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np

from simppo.eval.metrics import MotionResult
from simppo.utils.files import atomic_write, atomic_write_text

CSV_FIELDS = ("name", "play", "success", "survival_s", "length_s", "mpjpe_global_mm", "mpjpe_local_mm",
              "joint_angle_error_rad", "velocity_error_mps", "acceleration_error_mps2", "max_body_error_m",
              "failure_time_s", "failure_cause")
FAILED_MANIFEST = "failed_motions.yaml"
FAILED_DIR = "failed_motions"
MAX_BARS = 60


def worst(results: list[MotionResult], k: int = 10) -> list[MotionResult]:
    """Failed motions first (earliest failure first), then by global MPJPE, largest first."""
    def key(r: MotionResult):
        err = r.mpjpe_global_mm if math.isfinite(r.mpjpe_global_mm) else math.inf
        return (r.success, r.survival_s if not r.success else 0.0, -err)

    return sorted(results, key=key)[:k]


def label(r: MotionResult, plays: int = 1) -> str:
    """A play's name in tables and charts: the motion's, with ``#k`` (1-based) when each motion was played more
    than once."""
    return f"{r.name} #{r.play + 1}" if plays > 1 else r.name


def _fmt(v, spec: str = ".1f") -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, spec)


def summary_table(report: dict, results: list[MotionResult], k: int = 10) -> str:
    """The stdout summary: success rate, mean / median MPJPE, and the worst ``k`` plays (motions unless
    ``report["plays"]`` > 1)."""
    s = report["summary"]
    plays = int(report.get("plays", 1))
    rate = f"({_fmt(100.0 * s['success_rate'] if s['success_rate'] is not None else None)}%)"
    if plays > 1:
        head = (f"  motions {s['num_motions']} x {plays} plays  success {s['num_success']}/{s['num_plays']} plays "
                f"{rate}, every play of {s['num_motions_every_play_success']}/{s['num_motions']} motions  ")
    else:
        head = f"  motions {s['num_motions']}  success {s['num_success']}/{s['num_motions']} {rate}  "
    lines = [
        f"simppo-eval: {report['checkpoint']}",
        head +
        f"survival {_fmt(100.0 * s['survival_fraction'] if s['survival_fraction'] is not None else None)}% of "
        "clip time",
        f"  MPJPE global mean {_fmt(s['mpjpe_global_mm'])} mm, median {_fmt(s['mpjpe_global_mm_median'])} mm; "
        f"root-relative mean {_fmt(s['mpjpe_local_mm'])} mm, median {_fmt(s['mpjpe_local_mm_median'])} mm",
        f"  joint error {_fmt(s['joint_angle_error_rad'], '.3f')} rad, velocity error "
        f"{_fmt(s['velocity_error_mps'], '.3f')} m/s, acceleration error {_fmt(s['acceleration_error_mps2'], '.2f')} "
        "m/s^2",
    ]
    rows = worst(results, k)
    if rows:
        width = max(12, max(len(label(r, plays)) for r in rows))
        lines.append(f"  worst {len(rows)}:")
        lines.append(f"    {'motion':<{width}}  ok  survival/length  MPJPE-g  MPJPE-l  failure")
        for r in rows:
            fail = f"{r.failure['cause']} @ {r.failure['time_s']:.2f}s" if r.failure else ""
            lines.append(f"    {label(r, plays):<{width}}  {'yes' if r.success else 'no ':<3} "
                         f"{r.survival_s:7.2f}/{r.length_s:<7.2f}  {_fmt(r.mpjpe_global_mm):>7}  "
                         f"{_fmt(r.mpjpe_local_mm):>7}  {fail}")
    return "\n".join(lines)


def csv_text(results: list[MotionResult]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    for r in results:
        row = r.to_json()
        fail = row.pop("failure") or {}
        row["failure_time_s"], row["failure_cause"] = fail.get("time_s", ""), fail.get("cause", "")
        w.writerow(["" if row[k] is None else row[k] for k in CSV_FIELDS])
    return buf.getvalue()


def write_bar_chart(path: Path, results: list[MotionResult], title: str = "", plays: int = 1) -> Path:
    """Horizontal bars of the global MPJPE per play (red: failed); the worst ``MAX_BARS`` when larger."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted(worst(results, MAX_BARS), key=lambda r: r.name) if len(results) > MAX_BARS else results
    height = 1.0 + 0.28 * max(len(rows), 1)
    fig, ax = plt.subplots(figsize=(8, height), dpi=100)
    vals = [r.mpjpe_global_mm if math.isfinite(r.mpjpe_global_mm) else 0.0 for r in rows]
    colors = ["#2e8b57" if r.success else "#d0453a" for r in rows]
    ax.barh(range(len(rows)), vals, color=colors)
    ax.set_yticks(range(len(rows)), [label(r, plays) for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("MPJPE global (mm)  —  green: success, red: failed")
    suffix = f" (worst {MAX_BARS} of {len(results)})" if len(results) > MAX_BARS else ""
    ax.set_title((title or "per-motion body position error") + suffix, fontsize=9)
    fig.tight_layout()
    atomic_write(path, lambda f: fig.savefig(f, format="png"))
    plt.close(fig)
    return path


def write_failed_manifest(out_dir: Path, results: list[MotionResult], motion_lib, robot_name: str,
                          checkpoint: str) -> Path | None:
    """The failed motions as a ``simppo-pack`` YAML manifest (``None`` when every motion succeeded); a motion
    with several failed plays is listed once.

    Each clip is written as ``failed_motions/<name>.npz`` (``fps``, ``root_pos``, ``root_quat`` wxyz,
    ``dof_pos`` in the robot config's joint order) from the loaded frames, so the manifest re-packs the
    motions exactly as they were evaluated, whatever became of their source files:
    ``simppo-pack failed_motions.yaml --robot <robot> --out DIR``.
    """
    import yaml

    failed, seen = [], set()
    for r in results:
        if not r.success and r.motion_id not in seen:
            seen.add(r.motion_id)
            failed.append(r)
    if not failed:
        return None
    clip_dir = out_dir / FAILED_DIR
    clip_dir.mkdir(parents=True, exist_ok=True)
    weights = [m.weight for i in range(len(motion_lib.index.shards)) for m in motion_lib.index.header(i).motions]
    frames = motion_lib.frames
    starts = motion_lib.motion_start.cpu().tolist()
    counts = motion_lib.motion_num_frames.cpu().tolist()
    entries, used = [], set()
    for r in failed:
        i = r.motion_id
        sl = slice(starts[i], starts[i] + counts[i])
        stem = unique_stem(r.name, used)
        arrays = {"fps": np.float64(motion_lib.motion_fps[i]),
                  "root_pos": frames["root_pos"][sl].cpu().numpy().astype(np.float64),
                  "root_quat": frames["root_quat"][sl].cpu().numpy().astype(np.float64),
                  "dof_pos": frames["dof_pos"][sl].cpu().numpy().astype(np.float64)}
        atomic_write(clip_dir / f"{stem}.npz", lambda f, a=arrays: np.savez(f, **a))
        entries.append({"file": f"{FAILED_DIR}/{stem}.npz", "name": r.name, "weight": float(weights[i])})
    header = (f"# Motions that failed simppo-eval of {checkpoint}.\n"
              f"# Re-pack them to fine-tune: simppo-pack {FAILED_MANIFEST} --robot {robot_name} --out failed_pack\n")
    path = out_dir / FAILED_MANIFEST
    atomic_write_text(path, header + yaml.safe_dump({"motions": entries}, sort_keys=False))
    return path


def unique_stem(name: str, used: set[str]) -> str:
    """A file stem for ``name`` (characters other than letters, digits and ``-_.`` become ``_``) that is not in
    ``used``, which it joins (``_2``, ``_3``, ... after a name whose stem is taken: no output overwrites another)."""
    stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in name).strip(".") or "motion"
    base, k = stem, 1
    while stem in used:
        k += 1
        stem = f"{base}_{k}"
    used.add(stem)
    return stem


def write_outputs(out_dir: Path, report: dict, results: list[MotionResult], motion_lib=None,
                  robot_name: str = "g1") -> dict[str, Path]:
    """``eval.json``, ``eval.csv``, ``eval_errors.png`` and (when some failed) the failed-motions manifest."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / "eval.json", "csv": out_dir / "eval.csv", "chart": out_dir / "eval_errors.png"}
    atomic_write_text(paths["json"], json.dumps(report, indent=1, allow_nan=False) + "\n")
    atomic_write_text(paths["csv"], csv_text(results))
    write_bar_chart(paths["chart"], results, title=f"{Path(report['checkpoint']).name}: per-motion error",
                    plays=int(report.get("plays", 1)))
    if motion_lib is not None:
        manifest = write_failed_manifest(out_dir, results, motion_lib, robot_name, report["checkpoint"])
        if manifest is not None:
            paths["failed_manifest"] = manifest
    return paths
