#!/usr/bin/env python
"""Make a large motion set from the shipped clips, for scale benchmarks: ``N`` CSV clips and a manifest.

    python -m tools.make_motion_set OUT --motions 10000 [--seed 0]      (from the repository root)

Clip ``k`` is shipped clip ``k mod 6``, time-warped (its frames played at 24..38 fps instead of 30: the manifest
gives each file its fps), turned by a random yaw about the first root position, moved by up to 2 m, and with
smooth joint perturbations (a few hundredths of a radian, clamped into the joint ranges).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import yaml

from simppo.motion.kinematics import RobotKinematics, quat_mul
from simppo.paths import MOTIONS_DIR


def make_motion_set(out: Path, num_motions: int, seed: int = 0) -> Path:
    """Write ``num_motions`` clips into ``out`` (sub-folders of 1000) and ``out/manifest.yaml``; returns it."""
    rng = np.random.default_rng(seed)
    robot = RobotKinematics.from_robot("g1")
    lo, hi = robot.joint_lower[robot.qpos_to_input], robot.joint_upper[robot.qpos_to_input]
    base = [np.loadtxt(p, delimiter=",", comments="#") for p in sorted(MOTIONS_DIR.glob("*.csv"))]
    entries = []
    for k in range(num_motions):
        rows = base[k % len(base)].copy()
        T = len(rows)
        yaw = rng.uniform(-np.pi, np.pi)
        c, s = np.cos(yaw), np.sin(yaw)
        p0 = rows[0, :2].copy()
        xy = rows[:, :2] - p0
        rows[:, :2] = p0 + np.stack([c * xy[:, 0] - s * xy[:, 1], s * xy[:, 0] + c * xy[:, 1]], -1)
        rows[:, :2] += rng.uniform(-2.0, 2.0, size=2)
        qz = np.broadcast_to([np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)], (T, 4))
        rows[:, 3:7] = quat_mul(qz, rows[:, 3:7])
        t = np.linspace(0.0, 1.0, T)[:, None]
        wobble = 0.03 * np.sin(2 * np.pi * (rng.uniform(0.5, 2.0, 29) * t + rng.uniform(0, 1, 29)))
        rows[:, 7:] = np.clip(rows[:, 7:] + wobble, lo, hi)
        sub = out / f"part{k // 1000:03d}"
        sub.mkdir(parents=True, exist_ok=True)
        path = sub / f"clip{k:06d}.csv"
        np.savetxt(path, rows, delimiter=",", fmt="%.6f")
        entries.append({"file": str(path.relative_to(out)), "fps": round(float(rng.uniform(24.0, 38.0)), 3)})
    manifest = out / "manifest.yaml"
    manifest.write_text(yaml.safe_dump({"motions": entries}, sort_keys=False))
    return manifest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--motions", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    print(make_motion_set(Path(args.out), args.motions, args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
