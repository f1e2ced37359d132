"""Learning curves from a run's ``metrics.csv`` (written by the runner every iteration): reward, body
error, episode length and steps/s as one PNG (``simppo-plot RUN_DIR``, and ``simppo-eval`` writes it too).

The body error curve is the env's logged ``error/body_pos`` (mean tracked-body distance in metres over
every env-step of the iteration, written by the reward kernel). Runs logged before that metric existed
fall back to an estimate from ``episode/rew_body_pos`` (weighted per-episode sum of ``exp(-e / σ²)``):
``σ · sqrt(-ln(r̄))`` with ``r̄`` the mean term per step — a trend, not a measurement.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from simppo.utils.files import atomic_write

METRICS_CSV = "metrics.csv"


def read_metrics(path: str | Path) -> dict[str, list[float]]:
    """Columns of ``metrics.csv`` as float lists (empty cells → NaN); ``ValueError`` naming the file when it is not
    a text CSV."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            cols: dict[str, list[float]] = {k: [] for k in reader.fieldnames or []}
            for row in reader:
                for k in cols:
                    v = row.get(k)
                    try:
                        cols[k].append(float(v) if v not in (None, "") else math.nan)
                    except (TypeError, ValueError):
                        cols[k].append(math.nan)
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ValueError(f"{path}: not a metrics CSV ({exc})") from None
    return cols


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def check_png_target(out: Path) -> None:
    """Refuse (``ValueError``, one line naming ``out``) a target that is not a ``.png`` path, or an existing file
    that is not a PNG: the chart replaces an earlier chart, never another file (a run's metrics.csv, notes)."""
    if out.suffix.lower() != ".png":
        raise ValueError(f"{out}: the chart is a PNG: give a path ending in .png")
    if out.is_dir():
        raise ValueError(f"{out}: is a folder")
    if out.exists():
        with open(out, "rb") as f:
            if f.read(len(PNG_MAGIC)) != PNG_MAGIC:
                raise ValueError(f"{out}: exists and is not a PNG image; not replaced")


def body_error_curve(cols: dict[str, list[float]], sigma: float, weight: float) -> list[float]:
    """Estimated tracked-body position error (m) per iteration (see the module docstring)."""
    out = []
    for r, n in zip(cols.get("episode/rew_body_pos", []), cols.get("episode/length", []), strict=False):
        mean_term = r / (weight * n) if weight and n and math.isfinite(r) and math.isfinite(n) else math.nan
        out.append(sigma * math.sqrt(-math.log(mean_term)) if 0.0 < mean_term <= 1.0 else math.nan)
    return out


def plot_curves(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """``<run_dir>/curves.png`` (or ``out``) from ``<run_dir>/metrics.csv``; raises ``FileNotFoundError`` without
    the CSV, ``ValueError`` for a CSV that is not one or an ``out`` it may not replace (:func:`check_png_target`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import yaml

    run_dir = Path(run_dir)
    path = run_dir / METRICS_CSV
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no metrics.csv (simppo-train writes it every iteration)")
    cols = read_metrics(path)
    x_key = "step" if "step" in cols else "epoch"
    x = cols.get(x_key, list(range(len(next(iter(cols.values()), [])))))
    sigma, weight = 0.3, 1.0
    cfg_path = run_dir / "config.yaml"
    if cfg_path.is_file():
        try:
            env = (yaml.safe_load(cfg_path.read_text()) or {}).get("env", {}) or {}
            sigma = float(env.get("sigmas", {}).get("body_pos", sigma))
            weight = float(env.get("rewards", {}).get("body_pos", weight))
        except (yaml.YAMLError, AttributeError, TypeError, ValueError):
            pass
    panels = [
        ("episode/reward", "episode reward", cols.get("episode/reward")),
        ("body_error", "body position error (m)",
         cols.get("error/body_pos") or body_error_curve(cols, sigma, weight)),
        ("episode/length", "episode length (steps)", cols.get("episode/length")),
        ("perf/steps_per_s", "env steps / s", cols.get("perf/steps_per_s")),
    ]
    fig, axes = plt.subplots(2, 2, figsize=(10, 6.5), dpi=100)
    for ax, (_, title, ys) in zip(axes.flat, panels, strict=True):
        if ys and any(math.isfinite(v) for v in ys):
            pts = [(a, b) for a, b in zip(x, ys, strict=False) if math.isfinite(b)]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], lw=1.2)
        else:
            ax.text(0.5, 0.5, "not logged yet", ha="center", va="center", transform=ax.transAxes, color="gray")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("env steps" if x_key == "step" else "epoch", fontsize=8)
        ax.grid(alpha=0.3)
    fig.suptitle(f"{run_dir.name}: learning curves", fontsize=11)
    fig.tight_layout()
    out = Path(out) if out else run_dir / "curves.png"
    check_png_target(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, lambda f: fig.savefig(f, format="png"))
    plt.close(fig)
    return out
