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


def test_a_row_cut_short_by_a_kill_does_not_fuse_with_the_next(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text("epoch,step,loss\n8,80,0.5\n9,90,0.4\n1")  # killed while appending epoch 10
    log = MetricsCSV(path)
    log.truncate_after(9)
    log.append({"epoch": 10, "step": 100, "loss": 0.3})
    assert path.read_text() == "epoch,step,loss\n8,80,0.5\n9,90,0.4\n10,100,0.3\n"
    path.write_text("epoch,step,loss\n8,80,0.5\n9,9")  # the same without a resume's truncation
    MetricsCSV(path).append({"epoch": 9, "step": 90, "loss": 0.4})
    assert path.read_text() == "epoch,step,loss\n8,80,0.5\n9,90,0.4\n"


def test_simppo_plot_replaces_only_a_chart(run_dir, tmp_path, capsys):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    csv_bytes = (run / "metrics.csv").read_bytes()
    notes = run / "notes.txt"
    notes.write_text("mine")
    for out, said in ((run / "metrics.csv", "give a path ending in .png"), (notes, "give a path ending in .png")):
        assert plot_main([str(run), "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"simppo-plot: error: {out}: ") and said in err and "\n" not in err, err
    fake = run / "photo.png"
    fake.write_bytes(b"not a png")
    assert plot_main([str(run), "--out", str(fake)]) == 2
    assert "exists and is not a PNG image" in capsys.readouterr().err
    assert (run / "metrics.csv").read_bytes() == csv_bytes and notes.read_text() == "mine"
    assert fake.read_bytes() == b"not a png"
    assert plot_main([str(run)]) == 0 and plot_main([str(run)]) == 0  # an earlier chart is replaced
    (run / "metrics.csv").write_bytes(b"\xff\xfe\x00garbage\x80")
    assert plot_main([str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"{run / 'metrics.csv'}: not a metrics CSV" in err and "\n" not in err, err
