"""``benchmarks/dataset.py`` end to end on a dozen clips (slow: it trains one iteration and evaluates; by hand:
``pytest -m slow tests/benchmarks/test_dataset_benchmark.py``)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_dataset_benchmark_reports_every_figure(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "dataset.py"), "--motions", "12", "--envs", "64",
                           "--eval-motions", "4", "--iters", "3", "--out", str(tmp_path)], capture_output=True,
                          text=True, timeout=1200, env={**os.environ, "WANDB_MODE": "disabled"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["pack"]["frames"] > 0 and report["library"]["bytes_per_frame"] > 0
    assert report["per_step"]["big"]["motions"] == 12 and report["per_step"]["small"]["motions"] == 6
    assert report["train"]["first_iteration_s"] > 0 and report["eval"]["rounds"] == 1
    assert (tmp_path / "run" / "last.ckpt").is_file() and (tmp_path / "eval" / "eval.json").is_file()
