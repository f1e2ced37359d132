"""``simppo-plot RUN_DIR [--out PNG]``: learning curves (reward, body error, episode length, steps/s) from
``RUN_DIR/metrics.csv`` as one PNG (default ``RUN_DIR/curves.png``)."""

from __future__ import annotations

import argparse
import sys

PROG = "simppo-plot"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", help="a simppo-train run folder (holding metrics.csv)")
    parser.add_argument("--out", default=None, help="PNG path (default RUN_DIR/curves.png)")
    args = parser.parse_args(argv)
    from simppo.eval.curves import plot_curves

    try:
        path = plot_curves(args.run_dir, args.out)
    except (OSError, ValueError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr, flush=True)
        return 2
    print(f"{PROG}: wrote {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
