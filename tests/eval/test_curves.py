"""``metrics.csv`` (written by the runner every iteration) and the learning-curve PNG."""

import csv

from simppo.cli.plot import main as plot_main
from simppo.utils.metrics_csv import MetricsCSV


def test_runner_wrote_metrics_csv(run_dir):
    rows = list(csv.DictReader(open(run_dir / "metrics.csv")))
    assert [int(r["epoch"]) for r in rows] == [1, 2]
    assert int(rows[1]["step"]) == 2 * 8 * 4
    # no episode of the untrained policy ends in 2 x 4 steps (the reference is fed forward): no episode/ keys yet
    assert float(rows[0]["perf/steps_per_s"]) > 0 and "actor/loss" in rows[0] and "error/body_pos" in rows[0]


def test_header_grows_and_resume_truncates(tmp_path):
    log = MetricsCSV(tmp_path / "metrics.csv")
    log.append({"epoch": 1, "step": 10, "a": 1.0})
    log.append({"epoch": 2, "step": 20, "a": 2.0, "b": 5.0})  # new key: header rewritten
    log.append({"epoch": 3, "step": 30, "b": 6.0})
    rows = list(csv.DictReader(open(tmp_path / "metrics.csv")))
    assert [(r["epoch"], r["a"], r["b"]) for r in rows] == [("1", "1.0", ""), ("2", "2.0", "5.0"), ("3", "", "6.0")]
    MetricsCSV(tmp_path / "metrics.csv").truncate_after(2)
    again = MetricsCSV(tmp_path / "metrics.csv")
    again.append({"epoch": 3, "step": 30, "a": 9.0})
    rows = list(csv.DictReader(open(tmp_path / "metrics.csv")))
    assert [(r["epoch"], r["a"]) for r in rows] == [("1", "1.0"), ("2", "2.0"), ("3", "9.0")]


def test_simppo_plot(run_dir, tmp_path, capsys):
    out = tmp_path / "curves.png"
    assert plot_main([str(run_dir), "--out", str(out)]) == 0
    assert out.read_bytes()[:4] == b"\x89PNG"
    assert plot_main([str(tmp_path)]) == 2
    assert "metrics.csv" in capsys.readouterr().err
