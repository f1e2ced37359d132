"""``simppo-eval`` on a checkpoint written by ``simppo-train``: metrics, outputs, the failed-motions manifest
round trip through ``simppo-pack``, and one-line errors for bad input."""

import csv
import json

import numpy as np
import pytest
import torch
import yaml

from simppo.cli.eval import main as eval_main


@pytest.fixture(scope="module")
def eval_out(run_dir, tmp_path_factory):
    """One evaluation of the (as good as untrained) policy on the shipped motions."""
    out = tmp_path_factory.mktemp("eval_out") / "ev"
    assert eval_main([f"checkpoint={run_dir / 'last.ckpt'}", f"out={out}"]) == 0
    return out


def test_kinematic_replay_gives_zero_mpjpe_and_full_success(loaded_run):
    """The env replays the reference (the simulator follows it exactly): the metrics must read ≈ 0."""
    from simppo.eval.loading import make_eval_env
    from simppo.eval.metrics import evaluate_motions

    env = make_eval_env(loaded_run, 4, "cpu", kinematic_replay=True)  # 6 motions: two rounds
    zeros = torch.zeros(4, env.num_actions)
    results = evaluate_motions(env, lambda obs: zeros)
    env.close()
    assert [r.name for r in results] == list(env.motion_lib.motion_names)
    assert all(r.success for r in results)
    for r in results:
        assert r.mpjpe_global_mm < 0.1 and r.mpjpe_local_mm < 0.1, r
        assert r.joint_angle_error_rad < 1e-4 and r.velocity_error_mps < 1e-2
        assert r.survival_s == pytest.approx(r.length_s)


def test_untrained_policy_fails_the_walk_clip(eval_out, capsys):
    report = json.loads((eval_out / "eval.json").read_text())
    walk = next(m for m in report["motions"] if m["name"] == "walk")
    assert walk["success"] is False
    assert walk["failure"]["cause"] and 0.0 < walk["failure"]["time_s"] < walk["length_s"]
    assert walk["survival_s"] == pytest.approx(walk["failure"]["time_s"])
    assert walk["mpjpe_global_mm"] > 10.0


def test_outputs_json_csv_chart(eval_out, run_dir):
    report = json.loads((eval_out / "eval.json").read_text())
    assert report["checkpoint"] == str(run_dir / "last.ckpt")
    s = report["summary"]
    for key in ("success_rate", "mpjpe_global_mm", "mpjpe_local_mm", "mpjpe_global_mm_median", "num_motions"):
        assert key in s
    assert s["num_motions"] == 6 and 0.0 <= s["success_rate"] < 1.0
    names = [m["name"] for m in report["motions"]]
    assert names == ["stand_sway", "squat", "arm_wave", "step_in_place", "walk", "turn"]
    for m in report["motions"]:
        assert {"name", "success", "survival_s", "length_s", "mpjpe_global_mm", "mpjpe_local_mm", "failure",
                "joint_angle_error_rad", "velocity_error_mps", "acceleration_error_mps2"} <= set(m)
    rows = list(csv.DictReader(open(eval_out / "eval.csv")))
    assert [r["name"] for r in rows] == names
    assert float(rows[4]["mpjpe_global_mm"]) == pytest.approx(report["motions"][4]["mpjpe_global_mm"])
    assert (eval_out / "eval_errors.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (eval_out / "curves.png").is_file()  # learning curves from the run's metrics.csv


def test_failed_manifest_round_trips_through_simppo_pack(eval_out, loaded_run, tmp_path):
    from simppo.cli.pack import main as pack_main
    from simppo.motion.motion_lib import MotionLib

    manifest = eval_out / "failed_motions.yaml"
    doc = yaml.safe_load(manifest.read_text())
    report = json.loads((eval_out / "eval.json").read_text())
    failed = [m["name"] for m in report["motions"] if not m["success"]]
    assert [e["name"] for e in doc["motions"]] == failed
    pack = tmp_path / "failed_pack"
    assert pack_main([str(manifest), "--robot", "g1", "--out", str(pack), "-q"]) == 0
    packed = MotionLib([str(pack)])
    orig = MotionLib(loaded_run.cfg.motion.resolved_files())
    assert packed.motion_names == failed
    for j, name in enumerate(failed):
        i = orig.motion_names.index(name)
        assert packed.motion_fps[j] == orig.motion_fps[i]
        a = slice(int(orig.motion_start[i]), int(orig.motion_start[i] + orig.motion_num_frames[i]))
        b = slice(int(packed.motion_start[j]), int(packed.motion_start[j] + packed.motion_num_frames[j]))
        for field in ("root_pos", "root_quat", "dof_pos"):
            np.testing.assert_allclose(packed.frames[field][b].numpy(), orig.frames[field][a].numpy(), atol=1e-6)
        np.testing.assert_allclose(packed.frames["body_pos_w"][b].numpy(), orig.frames["body_pos_w"][a].numpy(),
                                   atol=1e-5)


def test_summary_table_on_stdout(run_dir, tmp_path, capsys):
    assert eval_main([f"checkpoint={run_dir / 'last.ckpt'}", f"out={tmp_path / 'k'}", "kinematic_replay=true",
                      "num_envs=6", "plot=false"]) == 0
    out = capsys.readouterr().out
    assert "success 6/6 (100.0%)" in out and "MPJPE global mean" in out and "median" in out
    assert "worst 6" in out
    assert not (tmp_path / "k" / "failed_motions.yaml").exists()  # nothing failed


def test_missing_checkpoint_is_a_one_line_error(tmp_path, capsys):
    out = tmp_path / "o"
    assert eval_main([f"checkpoint={tmp_path / 'nope.ckpt'}", f"out={out}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("simppo-eval: error:") and "nope.ckpt" in err
    assert not out.exists()


def test_layout_mismatch_names_both_layouts(run_dir, tmp_path, capsys):
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    cfg["env"]["future_steps"] = [1, 2]
    other = tmp_path / "config.yaml"
    other.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "o"
    assert eval_main([f"checkpoint={run_dir / 'last.ckpt'}", f"config={other}", f"out={out}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "checkpoint layout [obs" in err and "does not match" in err and "future_steps [1, 2]" in err
    assert not out.exists()


def test_unknown_key_and_bad_viewer_exit_2(run_dir, capsys):
    assert eval_main([f"checkpoint={run_dir / 'last.ckpt'}", "no_such_key=1"]) == 2
    assert "no_such_key" in capsys.readouterr().err
    assert eval_main([f"checkpoint={run_dir / 'last.ckpt'}", "viewer=tv"]) == 2
    assert "viewer=tv" in capsys.readouterr().err
    assert eval_main([]) == 2  # checkpoint is required
    assert "checkpoint" in capsys.readouterr().err


def test_existing_out_is_refused_without_force_and_replaced_whole_with_it(eval_out, run_dir, tmp_path, capsys):
    """An earlier evaluation with failures, then ``force=true`` with one that has none: the old failed-motions
    manifest and clips go with the rest; nothing of the old set is left beside the new eval.json."""
    import shutil

    out = tmp_path / "ev"
    shutil.copytree(eval_out, out)
    assert (out / "failed_motions.yaml").is_file() and (out / "failed_motions").is_dir()
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    replay = [f"checkpoint={run_dir / 'last.ckpt'}", f"out={out}", "kinematic_replay=true", "num_envs=6", "plot=false"]
    assert eval_main(replay) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"simppo-eval: error: out={out}: exists and is not empty (pass force=true to replace the outputs " \
                  "there, or choose another out)", err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert eval_main([*replay, "force=true"]) == 0
    report = json.loads((out / "eval.json").read_text())
    assert report["summary"]["success_rate"] == 1.0
    assert sorted(p.name for p in out.iterdir()) == ["eval.csv", "eval.json", "eval_errors.png"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".ev.")]  # no temp folder left


def test_out_that_is_a_file_or_holds_other_files(run_dir, tmp_path, capsys):
    f = tmp_path / "notes.txt"
    f.write_text("mine")
    assert eval_main([f"checkpoint={run_dir / 'last.ckpt'}", f"out={f}"]) == 2
    assert capsys.readouterr().err.strip() == f"simppo-eval: error: out={f}: exists and is not a directory"
    assert eval_main([f"checkpoint={run_dir / 'last.ckpt'}", f"out={f / 'sub'}"]) == 2  # a folder under the file
    assert capsys.readouterr().err.strip() == (f"simppo-eval: error: {f}: is a file, so the folder {f / 'sub'} cannot "
                                               "be made there")
    assert f.read_text() == "mine"
    d = tmp_path / "mine"
    d.mkdir()
    (d / "thesis.tex").write_text("years")
    assert eval_main([f"checkpoint={run_dir / 'last.ckpt'}", f"out={d}", "force=true"]) == 2
    err = capsys.readouterr().err.strip()
    assert "holds 'thesis.tex', which this tool did not write" in err and "\n" not in err, err
    assert (d / "thesis.tex").read_text() == "years"


def interrupt_after_the_first_round(args: list[str], monkeypatch) -> None:
    """``simppo-eval args``, interrupted (Ctrl-C) once its first round of plays is kept."""
    import simppo.eval.metrics as metrics

    real = metrics.evaluate_motions

    def interrupted(env, act, **kw):
        keep = kw["on_round"]

        def once_then_stop(new):
            keep(new)
            raise KeyboardInterrupt

        return real(env, act, **{**kw, "on_round": once_then_stop})

    with monkeypatch.context() as patch:
        patch.setattr(metrics, "evaluate_motions", interrupted)
        with pytest.raises(KeyboardInterrupt):
            eval_main(args)


def test_an_interrupted_evaluation_resumes_where_it_stopped(run_dir, tmp_path, monkeypatch, capsys):
    """``resume=true``: 6 motions in rounds of 2; interrupted after the first round, the same command plays the
    other four only, and the report equals the uninterrupted evaluation's."""
    from simppo.utils.files import partial_directory

    out = tmp_path / "ev"
    args = [f"checkpoint={run_dir / 'last.ckpt'}", f"out={out}", "num_envs=2", "resume=true"]
    interrupt_after_the_first_round(args, monkeypatch)
    assert "run the same command again to continue" in capsys.readouterr().err
    assert not out.exists() and (partial_directory(out) / "rounds.jsonl").is_file()
    assert eval_main(args) == 0
    assert "resuming: 2 motions already played" in capsys.readouterr().out
    assert not partial_directory(out).exists() and not (out / "rounds.jsonl").exists()
    assert eval_main([args[0], f"out={tmp_path / 'whole'}", "num_envs=2"]) == 0  # the same evaluation, uninterrupted
    got, want = (json.loads((d / "eval.json").read_text())["motions"] for d in (out, tmp_path / "whole"))
    assert got == want
    assert eval_main([f"checkpoint={run_dir / 'last.ckpt'}", "resume=true"]) == 2
    assert "resume=true needs out=DIR" in capsys.readouterr().err


def test_plays_k_times_each_under_randomization_whatever_the_envs(run_dir, tmp_path, capsys):
    """``plays=2`` with deploy randomization and noise: two rows per motion, motion by motion; every play draws by
    (motion, play), so 4 envs in 3 rounds give the rows of 12 envs in one; the plays of a motion differ."""
    base = [f"checkpoint={run_dir / 'last.ckpt'}", "plays=2", "randomization=deploy", "obs_noise=true", "plot=false"]
    assert eval_main([*base, f"out={tmp_path / 'a'}", "num_envs=4"]) == 0
    out = capsys.readouterr().out
    assert "6 motions x 2 plays on 4 envs (3 rounds)" in out and "plays" in out and "every play of" in out
    report = json.loads((tmp_path / "a" / "eval.json").read_text())
    rows = report["motions"]
    assert report["plays"] == 2 and len(rows) == 12
    assert [(m["name"], m["play"]) for m in rows[:4]] == [("stand_sway", 0), ("stand_sway", 1), ("squat", 0),
                                                           ("squat", 1)]
    s = report["summary"]
    assert (s["num_motions"], s["num_plays"]) == (6, 12) and s["num_success"] == sum(m["success"] for m in rows)
    assert any(rows[2 * i]["mpjpe_global_mm"] != rows[2 * i + 1]["mpjpe_global_mm"] for i in range(6))
    csv_rows = list(csv.DictReader(open(tmp_path / "a" / "eval.csv")))
    assert [int(r["play"]) for r in csv_rows] == [0, 1] * 6
    failed = [e["name"] for e in yaml.safe_load((tmp_path / "a" / "failed_motions.yaml").read_text())["motions"]]
    assert failed == list(dict.fromkeys(m["name"] for m in rows if not m["success"]))  # each motion once
    assert eval_main([*base, f"out={tmp_path / 'b'}", "num_envs=12"]) == 0
    assert json.loads((tmp_path / "b" / "eval.json").read_text())["motions"] == rows


def test_an_interrupted_evaluation_of_several_plays_resumes_where_it_stopped(run_dir, tmp_path, monkeypatch,
                                                                             capsys):
    out = tmp_path / "ev"
    args = [f"checkpoint={run_dir / 'last.ckpt'}", f"out={out}", "num_envs=5", "resume=true", "plays=2",
            "obs_noise=true", "plot=false"]
    interrupt_after_the_first_round(args, monkeypatch)
    assert eval_main(args) == 0
    assert "resuming: 5 plays already played" in capsys.readouterr().out
    assert eval_main([args[0], f"out={tmp_path / 'whole'}", "num_envs=12", *args[4:]]) == 0
    got, want = (json.loads((d / "eval.json").read_text())["motions"] for d in (out, tmp_path / "whole"))
    assert [(m["name"], m["play"]) for m in got] == [(m["name"], m["play"]) for m in want]
    assert got == want


@pytest.mark.parametrize("plays, message", [
    ("0", "plays=0: play each motion at least once"),
    ("3", "plays=3: the plays of a motion differ only under randomization=deploy or obs_noise=true"),
])
def test_plays_that_cannot_differ_are_a_one_line_error(run_dir, tmp_path, capsys, plays, message):
    out = tmp_path / "o"
    assert eval_main([f"checkpoint={run_dir / 'last.ckpt'}", f"out={out}", f"plays={plays}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith(f"simppo-eval: error: {message}"), err
    assert not out.exists()
