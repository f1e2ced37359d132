"""``simppo-pack``: pack motion clips into mmap-able simppo motion shards.

    simppo-pack INPUT... --robot g1 --out DIR [--fps 30] [--quat-order wxyz|xyzw] [--target-fps F]
                [--max-motions-per-shard N] [--allow-airborne] [--recursive] [--mirror] [--workers N]
                [--resume] [--force]
    simppo-pack --verify PACK... [--robot g1]

``--force`` replaces only a directory that is a simppo pack (and never one that is or holds an input).
``--verify`` reads packs in full and checks every checksum and the physical bounds (exit 0 or 2).
SIGINT and SIGTERM leave nothing behind (exit 130 / 143), but with ``--resume``: then the finished shards stay
in ``.<out>.partial`` beside ``--out`` and the same command continues from them.

Errors print one line ``simppo-pack: error: <file>:<row>:<col>: <what>`` and exit with status 2.
Repairs (joint values clamped into their range, frames lifted onto the floor, see
:mod:`simppo.motion.pack`) print one line each, ``simppo-pack: warning: <file>: <what>`` (not with ``-q``).
"""

from __future__ import annotations

import argparse
import signal
import sys

from simppo.cli.errors import os_error_line, report
from simppo.motion.bounds import MAX_FPS, MIN_FPS
from simppo.motion.format import ShardFormatError
from simppo.motion.pack import MotionPackError, PackOptions, pack_motions, verify_pack
from simppo.utils.files import partial_directory


class Terminated(BaseException):
    """SIGTERM (``timeout``, SLURM): unwinds like Ctrl-C, so the temporary pack folder is removed."""


def build_parser() -> argparse.ArgumentParser:
    d = PackOptions()
    p = argparse.ArgumentParser(
        prog="simppo-pack",
        description="Pack G1-style motion clips (CSV rows: root x,y,z, root quaternion, joint angles in the "
        "robot's joint order, e.g. Unitree's LAFAN1 retargets with --quat-order xyzw; NPZ with fps + qpos or "
        "root_pos/root_quat/dof_pos; BeyondMimic / mjlab motion NPZ; ProtoMotions .motion files; YAML manifests; "
        "directories) into simppo motion shards plus index.json.",
    )
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="csv / npz / .motion files, yaml manifests, directories")
    p.add_argument("--robot", default="g1", help="robot config name or path (default: g1)")
    p.add_argument("--out", help="output pack directory (required unless --verify)")
    p.add_argument("--verify", action="store_true",
                   help="check the INPUT packs in full (checksums, unit quaternions, speeds, joint ranges); "
                   "writes nothing")
    p.add_argument("--fps", type=float, default=d.fps,
                   help=f"frame rate of CSV inputs, in [{MIN_FPS:g}, {MAX_FPS:g}] (default: 30)")
    p.add_argument(
        "--quat-order",
        choices=("wxyz", "xyzw"),
        default=d.quat_order,
        help="root quaternion order in the inputs (default: wxyz)",
    )
    p.add_argument("--target-fps", type=float, default=None, help="resample every clip to this rate")
    p.add_argument("--max-motions-per-shard", type=int, default=d.max_motions_per_shard)
    p.add_argument(
        "--joint-limit-tol",
        type=float,
        default=d.joint_limit_tol,
        help="joint values this far outside their range (rad) are clamped into it with a warning; "
        "farther is an error (default: 0.05)",
    )
    p.add_argument(
        "--ground-tol",
        type=float,
        default=d.ground_tol,
        help="frames whose collision geometry reaches this far below z=0 (m) are lifted onto the floor with "
        "a warning; deeper is an error (default: 0.05)",
    )
    p.add_argument("--fix-height", choices=["auto", "all", "none"], default=d.fix_height,
                   help="shift each clip so that its lowest point over all frames touches the floor: auto (default) "
                   "for ProtoMotions .motion files, whose loader shifts them onto the floor too (when that would "
                   "leave the clip floating, their sinking frames are lifted onto the floor one by one instead); "
                   "all; none")
    p.add_argument("--recursive", action="store_true",
                   help="directories: pack the motion files of every sub-directory too (named by their path)")
    p.add_argument("--workers", type=int, default=0,
                   help="processes packing shards at once (default 0: one per core)")
    p.add_argument("--resume", action="store_true",
                   help="keep the finished shards of an interrupted pack (in .<out>.partial beside --out) and "
                   "continue from them: shards whose inputs and options are unchanged are not redone")
    p.add_argument("--mirror", action="store_true",
                   help="add every clip's left-right mirror image as <name>_mirror (the robot config's mirror map)")
    p.add_argument("--allow-airborne", action="store_true",
                   help="accept clips that start (or mostly stay) in the air; without it they are refused")
    p.add_argument("--force", action="store_true",
                   help="replace an existing output directory that holds a simppo pack")
    p.add_argument("-q", "--quiet", action="store_true", help="print errors only (no warnings, no summary)")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verify:
        return _verify(args)
    if not args.out:
        parser.error("--out is required (or --verify to check packs)")
    if args.max_motions_per_shard < 1:
        parser.error("--max-motions-per-shard must be >= 1")
    if args.workers < 0:
        parser.error("--workers must be >= 0 (0: one per core)")
    opts = PackOptions(
        fps=args.fps,
        quat_order=args.quat_order,
        target_fps=args.target_fps,
        max_motions_per_shard=args.max_motions_per_shard,
        joint_limit_tol=args.joint_limit_tol,
        ground_tol=args.ground_tol,
        fix_height=args.fix_height,
        allow_airborne=args.allow_airborne,
        recursive=args.recursive,
        mirror=args.mirror,
        workers=args.workers or None,
        resume=args.resume,
        progress=not args.quiet and sys.stderr.isatty(),
    )

    def on_term(signum, frame):
        raise Terminated

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        res = pack_motions(args.inputs, args.out, robot=args.robot, force=args.force, opts=opts)
    except MotionPackError as e:
        return report("simppo-pack", f"{e}")
    except OSError as e:  # the output folder or an input that the readers did not open themselves
        return report("simppo-pack", os_error_line(e, args.out))
    except KeyboardInterrupt:
        print(f"simppo-pack: interrupted; {_left(args)}", file=sys.stderr)
        return 130
    except Terminated:
        print(f"simppo-pack: terminated (SIGTERM); {_left(args)}", file=sys.stderr)
        return 128 + signal.SIGTERM
    finally:
        signal.signal(signal.SIGTERM, previous)
    if not args.quiet:
        for w in res.warnings:
            print(f"simppo-pack: warning: {w}", file=sys.stderr)
        for n in res.notes:
            print(f"simppo-pack: note: {n}")
        print(
            f"simppo-pack: {res.num_motions} motions, {res.num_frames} frames, {len(res.shards)} shard(s) "
            f"-> {res.out_dir} ({res.seconds:.2f} s)"
        )
    return 0


def _left(args) -> str:
    if args.resume:
        return f"finished shards kept in {partial_directory(args.out)}; run again with --resume to continue"
    return "nothing written"


def _verify(args) -> int:
    try:
        shards = verify_pack(args.inputs, robot=args.robot)
    except (ShardFormatError, MotionPackError) as e:
        return report("simppo-pack", f"{e}")
    if not args.quiet:
        for path, motions, frames in shards:
            print(f"simppo-pack: ok: {path}: {motions} motions, {frames} frames")
    return 0


if __name__ == "__main__":
    sys.exit(main())
