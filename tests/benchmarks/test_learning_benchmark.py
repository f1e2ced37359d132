"""``benchmarks/learning.py`` end to end at a tiny budget: one row per sample count, each after that many samples,
with the evaluator's metrics per clip, and a checkpoint that simppo-eval plays to the same result."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import torch

from simppo.envs.imitation.config import AdaptiveSigmaCfg, RewardSigmasCfg
from simppo.kernels.imitation.spec import REWARD_NAMES
from simppo.paths import MOTIONS_DIR

ROOT = Path(__file__).resolve().parents[2]


ENV = {**os.environ, "WANDB_MODE": "disabled"}


def run_bench(out: Path, motions: list[str], samples: str, *extra: str, overrides: tuple[str, ...] = ()):
    """Run the benchmark on shipped ``motions`` (8 envs, 8 steps an iteration, then ``overrides``)."""
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "learning.py"),
                           *(str(MOTIONS_DIR / m) for m in motions), "--samples", samples, "--num-envs", "8",
                           "--out", str(out), *extra, "--", "agent.num_steps=8", *overrides],
                          capture_output=True, text=True, timeout=900, env=ENV)


def curve(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "curve.jsonl").read_text().splitlines()]


def bench(out: Path, motions: list[str], samples: str, *extra: str, overrides: tuple[str, ...] = ()) -> list[dict]:
    """:func:`run_bench`, which must succeed; the rows of ``out/curve.jsonl``."""
    proc = run_bench(out, motions, samples, *extra, overrides=overrides)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return curve(out)


def test_curve_rows_and_checkpoints(tmp_path):
    out = tmp_path / "bench"
    rows = bench(out, ["squat.csv", "walk.csv"], "300,100")
    assert [r["iterations"] for r in rows] == [2, 5]  # 64 samples an iteration: first past 100, then past 300
    assert [r["samples"] for r in rows] == [128, 320]
    # each row counts the samples each clip received since the row before, all of them
    assert [sum(m["train_samples"] for m in r["motions"].values()) for r in rows] == [128, 192]
    configured = RewardSigmasCfg()
    for r in rows:
        assert set(r["motions"]) == {"squat", "walk"}
        assert 0.0 <= r["success_rate"] <= 1.0 and 0.0 < r["survival_fraction"] <= 1.0
        assert r["success_rate"] == sum(m["success"] for m in r["motions"].values()) / 2
        assert r["mpjpe_global_mm"] > 0 and r["mpjpe_local_mm"] > 0
        assert "agent.num_steps=8" in r["overrides"]
        assert abs(sum(m["start_share"] for m in r["motions"].values()) - 1.0) < 1e-3
        assert abs(sum(m["sample_share"] for m in r["motions"].values()) - 1.0) < 1e-3
        assert all(m["train_samples"] > 0 for m in r["motions"].values())
        assert min(m["start_share"] for m in r["motions"].values()) >= 0.25 - 1e-3  # the motion floor: >= 0.5 / 2
        u = r["update"]
        assert u["actor/kl"] >= 0 and 0 <= u["actor/clip_frac"] <= 1 and u["actor/lr"] > 0 and r["sigma_mean"] > 0
        assert all(m["sigma"] == round(r["sigma_mean"], 4) for m in r["motions"].values())  # one shared σ
        # env.adaptive_sigma's terms are reported; 300 samples are before its start_steps: every σ as configured
        assert r["reward_sigmas"] == {t: round(getattr(configured, t), 4) for t in AdaptiveSigmaCfg().terms}
    assert {p.name for p in out.glob("samples_*.ckpt")} == {"samples_100.ckpt", "samples_300.ckpt"}
    played = subprocess.run([str(Path(sys.executable).parent / "simppo-eval"), f"checkpoint={out / 'samples_300.ckpt'}",
                             f"out={tmp_path / 'eval'}"], capture_output=True, text=True, timeout=600, env=ENV)
    assert played.returncode == 0, played.stderr[-3000:]
    evaluated = {m["name"]: m for m in json.loads((tmp_path / "eval" / "eval.json").read_text())["motions"]}
    for name, m in rows[-1]["motions"].items():
        assert evaluated[name]["success"] == m["success"]
        assert abs(evaluated[name]["mpjpe_global_mm"] - m["mpjpe_global_mm"]) < 0.1


def load_benchmark():
    spec = importlib.util.spec_from_file_location("learning_benchmark", ROOT / "benchmarks" / "learning.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_samples_count_for_the_motion_each_env_played_before_its_reset():
    """A step's sample belongs to the motion the env played during it, not to the one its reset draws."""
    env = SimpleNamespace(motion_lib=SimpleNamespace(num_motions=3), num_envs=4, device="cpu",
                          motion_ids=torch.tensor([0, 0, 1, 2], dtype=torch.int32))
    redraws = iter([torch.tensor([2, 0, 2, 2]), torch.tensor([2, 2, 2, 2])])

    def step(actions):
        env.motion_ids.copy_(next(redraws))  # the step's resets draw new motions in place
        return actions

    env.step = step
    counter = load_benchmark().MotionSampleCounter(env)
    env.step(None)
    env.step(None)
    assert counter.take() == [3, 1, 4]  # [0, 0, 1, 2] then [2, 0, 2, 2]
    assert counter.take() == [0, 0, 0]


def test_each_motion_reports_its_own_sigma_row_with_per_motion_exploration(tmp_path):
    """Also the reward σ of the terms that env.adaptive_sigma tightens, as the checkpoint's env holds it."""
    out = tmp_path / "bench"
    proc = run_bench(out, ["squat.csv", "walk.csv"], "300",
                     overrides=("agent.exploration=per_motion", "env.adaptive_sigma.terms=[body_pos]",
                                "env.adaptive_sigma.per_motion=false", "env.adaptive_sigma.start_steps=0"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = curve(out)[-1]
    saved = torch.load(out / "samples_300.ckpt", weights_only=True)["env"]["adaptive_sigma"]
    assert set(row["reward_sigmas"]) == {"body_pos"}
    assert 0.03 <= row["reward_sigmas"]["body_pos"] < 0.3  # tightened from the configured 0.3 m
    assert f"reward sigma body_pos {row['reward_sigmas']['body_pos']:.3f}" in proc.stdout
    assert row["reward_sigmas"]["body_pos"] == round(float(saved[0, 0, REWARD_NAMES.index("body_pos")]), 4)
    log_std = torch.load(out / "samples_300.ckpt", weights_only=True)["model"]["actor.log_std"]
    # in the parameter's float32, as the benchmark reads it: a float64 mean can round the other way at 4 decimals
    rows = log_std.exp().mean(-1).tolist()  # the pack holds squat then walk: rows 0 and 1
    assert [row["motions"][name]["sigma"] for name in ("squat", "walk")] == [round(v, 4) for v in rows]
    assert rows[0] != rows[1]
    assert f"sigma {row['motions']['walk']['sigma']:.3f}" in proc.stdout


def test_resume_continues_the_run_exactly(tmp_path):
    """A run stopped at 100 samples and continued with ``--resume`` gives the row of the run that never stopped."""
    whole = bench(tmp_path / "whole", ["squat.csv"], "100,200")
    stopped = tmp_path / "parts"
    bench(stopped, ["squat.csv"], "100")
    parts = bench(stopped, ["squat.csv"], "100,200", "--resume", str(stopped / "samples_100.ckpt"))
    assert [r["samples"] for r in parts] == [128, 256]  # the first row is not repeated
    keys = ("success_rate", "survival_fraction", "mpjpe_global_mm", "mpjpe_local_mm", "sigma_mean", "motions")
    assert {k: parts[-1][k] for k in keys} == {k: whole[-1][k] for k in keys}
    assert parts[-1]["update"] == whole[-1]["update"]


def test_a_time_limit_ends_the_run_with_a_row_where_it_stopped(tmp_path):
    """``--max-train-s``: a run on a machine lent for a fixed time ends with a row and a checkpoint at the samples
    it reached, short of its sample count, and ``--resume`` continues from there to the count."""
    out = tmp_path / "run"
    rows = bench(out, ["squat.csv"], "100000", "--max-train-s", "0")
    assert len(rows) == 1 and rows[0]["samples"] == 64 and rows[0]["stopped"] == "--max-train-s 0"
    assert [p.name for p in out.glob("samples_*.ckpt")] == ["samples_64.ckpt"]
    rows = bench(out, ["squat.csv"], "64,128", "--resume", str(out / "samples_64.ckpt"))
    assert [r["samples"] for r in rows] == [64, 128] and "stopped" not in rows[-1]


def test_resume_refuses_a_different_config(tmp_path):
    """Continuing a run with other overrides would mix two configs in one curve: one line naming the run's
    config.yaml and the key, and nothing written."""
    out = tmp_path / "run"
    bench(out, ["squat.csv"], "100")
    before = (out / "config.yaml").read_text()
    proc = run_bench(out, ["squat.csv"], "100,200", "--resume", str(out / "samples_100.ckpt"),
                     overrides=("agent.actor_lr=0.0003",))
    assert proc.returncode != 0
    line = proc.stderr.strip().splitlines()[-1]
    assert str(out / "config.yaml") in line and "agent.actor_lr=0.0001 (now 0.0003)" in line, line
    assert "--branch" in line
    assert len(curve(out)) == 1 and (out / "config.yaml").read_text() == before
    assert not (out / "samples_200.ckpt").exists()
    # a run of an older simppo: its config lacks a setting added since, which it trained at that setting's default
    older = "\n".join(line for line in before.splitlines() if "symmetry_augment" not in line)
    assert older != before
    (out / "config.yaml").write_text(older)
    proc = run_bench(out, ["squat.csv"], "100,200", "--resume", str(out / "samples_100.ckpt"),
                     overrides=("agent.symmetry_augment=true",))
    assert proc.returncode != 0 and "agent.symmetry_augment=<unset> (now True)" in proc.stderr, proc.stderr[-2000:]
    assert [r["samples"] for r in bench(out, ["squat.csv"], "100,200", "--resume",
                                        str(out / "samples_100.ckpt"))] == [128, 256]


def test_branch_continues_another_run_under_other_overrides(tmp_path):
    """``--branch``: a run's checkpoint continued under other overrides into a new folder, the run's own folder
    untouched; its rows name the checkpoint and the changed setting; without a change it is the run continued."""
    from simppo.motion.pack import pack_motions

    pack = [str(tmp_path / "pack")]  # one pack for all (a motion file would be packed into each --out)
    pack_motions([str(MOTIONS_DIR / "squat.csv")], pack[0], robot="g1")
    run = tmp_path / "run"
    bench(run, pack, "100,200")
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    ckpt = str(run / "samples_100.ckpt")
    proc = run_bench(run, pack, "200", "--branch", ckpt, overrides=("agent.actor_lr=0.0003",))
    assert proc.returncode != 0 and "new --out" in proc.stderr.strip().splitlines()[-1]
    rows = bench(tmp_path / "branch", pack, "100,200", "--branch", ckpt, overrides=("agent.actor_lr=0.0003",))
    assert [r["samples"] for r in rows] == [256]
    assert rows[0]["branched_from"] == {"checkpoint": ckpt, "changed": "agent.actor_lr=0.0001 (now 0.0003)"}
    whole = curve(run)[-1]  # the branch trains at its own rate (both scaled by the batch's factor), not the run's
    assert abs(rows[0]["update"]["actor/lr"] / whole["update"]["actor/lr"] - 3.0) < 1e-5
    same = bench(tmp_path / "same", pack, "200", "--branch", ckpt)
    assert same[0]["branched_from"]["changed"] == "no setting"
    assert {k: same[0][k] for k in ("mpjpe_global_mm", "sigma_mean", "update")} == {
        k: whole[k] for k in ("mpjpe_global_mm", "sigma_mean", "update")}
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before
    proc = run_bench(tmp_path / "both", pack, "200", "--branch", ckpt, "--resume", ckpt)
    assert proc.returncode != 0 and "give one of them" in proc.stderr

