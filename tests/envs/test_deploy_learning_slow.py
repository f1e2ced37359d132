"""Slow check of issue 16: does training for deployment pay off?

Trains ``walk`` twice with the shipped defaults, once as is and once with ``+preset=deploy`` (domain
randomization, observation noise, the deployable observation set), each for the same budget of samples,
then plays both from t = 0 with simppo-eval's evaluator:

* with randomization and observation noise on (``env/randomization=deploy env.obs_noise=true``), COPIES plays
  each (every copy draws its own friction, offsets, CoM and pushes): the deploy-trained policy must survive
  longer on average;
* clean, on the training backend and on the other one: the sim-to-sim gap (survival and body-position
  error) of both policies.

Run by hand (~35 minutes on 2 CPU cores: two 15-minute trainings plus the plays)::

    pytest -m slow tests/envs/test_deploy_learning_slow.py -s

``SIMPPO_SLOW_TRAIN_SAMPLES`` sets each training's budget (default 1.5 M samples); ``SIMPPO_SLOW_SIM`` the training
backend (default: ``mjwarp`` on CUDA, ``mujoco`` on a CPU machine; ``SIMPPO_SLOW_SIM=mjwarp`` on a CPU
gives the MJWarp → MuJoCo C gap there too, with slower training); ``SIMPPO_SLOW_DEVICE`` (default auto).
"""

import json
import math
import os
import time

import pytest

from simppo.agent.runner import Runner
from simppo.motion.pack import pack_motions
from simppo.paths import MOTIONS_DIR
from simppo.utils.device import resolve_device
from tests.helpers import play_clips, train_setup

TRAIN_SAMPLES = int(float(os.environ.get("SIMPPO_SLOW_TRAIN_SAMPLES", 1.5e6)))
DEVICE = resolve_device(os.environ.get("SIMPPO_SLOW_DEVICE", "auto"))
TRAIN_SIM = os.environ.get("SIMPPO_SLOW_SIM") or ("mjwarp" if DEVICE.startswith("cuda") else "mujoco")
OTHER_SIM = "mujoco" if TRAIN_SIM == "mjwarp" else "mjwarp"
COPIES = 32  # plays per condition


def train(tmp_path, name: str, overrides: list[str]):
    cfg, env, agent = train_setup([*overrides, f"sim={TRAIN_SIM}", "logger=none", f"experiment_name={name}",
                                   f"motion.files=[{tmp_path / 'pack'}]"], DEVICE)
    t0 = time.perf_counter()

    def stop_after_budget(runner: Runner):
        if runner.step_count >= TRAIN_SAMPLES:
            runner.request_stop()

    runner = agent.loop(tmp_path / name, max_epochs=10 ** 6, epoch_hooks=[(1, stop_after_budget)])
    runner.train()
    print(f"{name}: {agent.epoch} iterations, {agent.step_count} samples in {time.perf_counter() - t0:.0f} s",
          flush=True)
    env.close()
    return cfg, agent.model


def play(cfg, model, sim_name: str, randomized: bool) -> dict[str, float]:
    """``COPIES`` plays of the clip from t = 0 by simppo-eval's evaluator (deterministic policy; randomized: each
    copy draws its own deploy randomization and observation noise): mean survival until the env's first termination
    (s), share of plays without one and mean anchor-aligned body error (m)."""
    device = "cpu" if sim_name == "mujoco" else DEVICE
    results = play_clips(cfg, model, 1, COPIES, device, max_body_error_m=math.inf, sim_name=sim_name,
                         randomization="deploy" if randomized else "none", obs_noise=randomized)
    n = len(results)
    return {"survival_s": round(sum(r.survival_s for r in results) / n, 6),
            "success": round(sum(r.success for r in results) / n, 6),
            "body_pos_error": round(sum(r.anchor_body_error_m for r in results) / n, 6)}


@pytest.mark.slow
@pytest.mark.timeout(5400)
def test_deploy_preset_survives_randomization_and_noise(tmp_path):
    pack_motions([str(MOTIONS_DIR / "walk.csv")], str(tmp_path / "pack"), robot="g1")
    policies = {"default": train(tmp_path, "default", []), "deploy": train(tmp_path, "deploy", ["+preset=deploy"])}
    report = {}
    for name, (cfg, model) in policies.items():
        report[name] = {
            "randomized_noisy": play(cfg, model, TRAIN_SIM, randomized=True),
            f"clean_{TRAIN_SIM}": play(cfg, model, TRAIN_SIM, randomized=False),
            f"clean_{OTHER_SIM}": play(cfg, model, OTHER_SIM, randomized=False),
        }
        clean, other = report[name][f"clean_{TRAIN_SIM}"], report[name][f"clean_{OTHER_SIM}"]
        report[name][f"sim_to_sim_gap_{TRAIN_SIM}_to_{OTHER_SIM}"] = {
            "survival_s": round(other["survival_s"] - clean["survival_s"], 6),
            "body_pos_error_m": round(other["body_pos_error"] - clean["body_pos_error"], 6),
        }
    print(json.dumps(report, indent=2), flush=True)
    default, deploy = (report[k]["randomized_noisy"] for k in ("default", "deploy"))
    assert deploy["survival_s"] > default["survival_s"], report
