"""The deploy preset end to end on a tiny run (``simppo-train +preset=deploy``, 1 iteration of 4 envs × 4
steps on MJWarp): ``simppo-export`` writes the deployable observation layout into ``policy.json``, and
``simppo-eval sim=...`` plays the policy on the other backend (sim-to-sim), both ways, with the same
metrics, also with domain randomization and observation noise on."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from simppo.kernels.imitation import spec

TRAIN = ["+preset=deploy", "sim=mjwarp", "num_envs=4", "max_epochs=1", "agent.num_steps=4", "eval_every=0",
         "logger=none", "progress_bar=false"]
# the deploy actor row, term by term, for the default future_steps [1, 2, 4, 8] (29 joints, 14 tracked bodies)
DEPLOY_LAYOUT = (["gravity_b", "root_ang_vel_b", "joint_pos_rel", "joint_vel", "last_action"]
                 + [f"future{k}_{t}" for k in (1, 2, 4, 8)
                    for t in ("ref_anchor_pos", "anchor_rot6d", "ref_joint_pos", "ref_body_pos")])


@pytest.fixture(scope="module")
def mjwarp_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("deploy") / "run"
    exe = str(Path(sys.executable).parent / "simppo-train")
    proc = subprocess.run([exe, *TRAIN, f"run_dir={out}"], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "WANDB_MODE": "disabled"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def mujoco_run(mjwarp_run, tmp_path_factory) -> Path:
    """The same weights as a run trained on ``sim=mujoco`` (only its config's backend differs)."""
    out = tmp_path_factory.mktemp("deploy_c") / "run"
    shutil.copytree(mjwarp_run, out)
    cfg = yaml.safe_load((out / "config.yaml").read_text())
    cfg["sim"]["name"] = "mujoco"
    (out / "config.yaml").write_text(yaml.safe_dump(cfg))
    return out


def test_export_writes_the_deploy_layout(mjwarp_run, tmp_path):
    from simppo.cli.export import main as export_main
    from simppo.eval.loading import load_train_config

    assert export_main([f"checkpoint={mjwarp_run / 'last.ckpt'}", f"out={tmp_path / 'policy'}"]) == 0
    meta = json.loads((tmp_path / "policy" / "policy.json").read_text())
    obs = meta["observation"]
    assert obs["set"] == "deploy" and meta["training"] == {"randomization": "deploy", "obs_noise": True}
    assert [t["name"] for t in obs["layout"]] == DEPLOY_LAYOUT
    cfg = load_train_config(mjwarp_run / "config.yaml")  # the run's robot and future frames, as the spec sizes them
    joints, tracked, future = len(cfg.robot.joint_names), len(cfg.robot.tracked_bodies), list(cfg.env.future_steps)
    want = spec.actor_obs_slices(joints, tracked, future, "deploy")
    assert {t["name"]: slice(t["start"], t["stop"]) for t in obs["layout"]} == want
    assert obs["dim"] == obs["layout"][-1]["stop"] == spec.obs_dims(joints, tracked, future, True, "deploy")[0]
    assert not any(t["name"].endswith(("lin_vel_b", "_anchor_pos")) and "ref_" not in t["name"]
                   for t in obs["layout"])  # no root linear velocity, no world position
    assert "ref_anchor_pos" in obs["conventions"]


@pytest.mark.parametrize("trained, played", [("mjwarp", "mujoco"), ("mujoco", "mjwarp")])
def test_sim_to_sim_eval_runs_both_ways(trained, played, mjwarp_run, mujoco_run, tmp_path):
    from simppo.cli.eval import main as eval_main

    run = mjwarp_run if trained == "mjwarp" else mujoco_run
    reports = {}
    for extra in ([], ["randomization=deploy", "obs_noise=true"]):
        out = tmp_path / ("noisy" if extra else "clean")
        args = [f"checkpoint={run / 'last.ckpt'}", f"sim={played}", "num_envs=3", "device=cpu", "plot=false",
                f"out={out}", *extra]
        assert eval_main(args) == 0
        reports[bool(extra)] = json.loads((out / "eval.json").read_text())
    clean, noisy = reports[False], reports[True]
    assert clean["sim"] == {"mujoco": "MuJoCoSim", "mjwarp": "MJWarpSim"}[played] == noisy["sim"]
    assert clean["trained_sim"] == trained
    assert (clean["randomization"], clean["obs_noise"]) == ("none", False)
    assert (noisy["randomization"], noisy["obs_noise"]) == ("deploy", True)
    assert [m["name"] for m in clean["motions"]] == [m["name"] for m in noisy["motions"]] and len(clean["motions"]) == 6
    # the randomized, noisy play is another play: the errors differ, motion by motion
    assert any(a["mpjpe_global_mm"] != b["mpjpe_global_mm"] for a, b in zip(clean["motions"], noisy["motions"],
                                                                           strict=True))
