#!/usr/bin/env python
"""Regenerate simppo's shipped sample motions: ``motions/<clip>.csv`` and the pack ``motions/g1_sample``.

    python -m tools.make_motions [--robot g1] [--out motions]      (from the repository root)

The clips come from :mod:`tools.synth` (kinematic, feet pinned by IK); the CSV rows are
``root x,y,z, root quaternion wxyz, 29 joint angles in the robot config's joint order`` at 30 fps, and
the pack is produced from those CSVs by the same code as ``simppo-pack``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from simppo.motion.pack import PackOptions, pack_motions
from simppo.paths import MOTIONS_DIR
from tools.synth import CLIP_NAMES, FPS, G1MotionSynth


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robot", default="g1")
    ap.add_argument("--out", default=str(MOTIONS_DIR))
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    synth = G1MotionSynth(args.robot, fps=FPS)
    files = []
    for name in CLIP_NAMES:
        rows = synth.to_csv_rows(synth.generate(name))
        path = out / f"{name}.csv"
        np.savetxt(path, rows, delimiter=",", fmt="%.6f")
        files.append(path)
        print(f"{path}: {rows.shape[0]} frames ({(rows.shape[0] - 1) / FPS:.2f} s)")
    res = pack_motions(files, out / f"{args.robot}_sample", robot=args.robot, force=True, opts=PackOptions(fps=FPS))
    print(f"packed {res.num_motions} motions, {res.num_frames} frames -> {res.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
