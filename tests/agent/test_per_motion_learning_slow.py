"""Learning check of per-motion exploration, run by hand::

    pytest -m slow tests/agent/test_per_motion_learning_slow.py -s

An easy clip (``stand_sway``) and a hard one (``turn``) are trained together with the shipped defaults
(``SIMPPO_SLOW_DEVICE``, default auto: 256 envs and MuJoCo C on a CPU, 4096 envs and MJWarp on a GPU), once
with ``agent.exploration=per_motion`` and once with ``shared``, for the same fixed budget of samples
(``SIMPPO_SLOW_PER_MOTION_SAMPLES``; default 3 M on a CPU: 489 PPO iterations of 256 envs; 14.7 M on a GPU: 150
iterations of 4096 envs) from the same seed. Then every clip is played from t = 0 by simppo-eval's evaluator (the
mean action). Checks: the learned σ of the two motions differ clearly (≥ 10 %), and tracking of the hard clip
with per-motion σ is at least as good as with the shared σ (survival no shorter, anchor-aligned body error no
larger, up to a small seed tolerance). Printed too: on how many joints the hard clip's σ is the larger, and the
paired t of the per-joint log-σ differences (the rows' noise is per joint). Measured figures:
``docs/learning.md``.
"""

import math
import os
import time

import pytest

from simppo.motion.pack import pack_motions
from simppo.paths import MOTIONS_DIR
from simppo.utils.device import resolve_device
from tests.helpers import play_clips, train_setup

DEVICE = resolve_device(os.environ.get("SIMPPO_SLOW_DEVICE", "auto"))
# 150 PPO iterations of 4096 envs on a GPU; 3 M samples (489 iterations of 256 envs, ~17 min) on 2 CPU cores
DEFAULT_SAMPLES = 150 * 4096 * 24 if DEVICE.startswith("cuda") else 3_000_000
SAMPLES = int(float(os.environ.get("SIMPPO_SLOW_PER_MOTION_SAMPLES", DEFAULT_SAMPLES)))
# easy, hard: with the reference fed forward into the position targets the squat is tracked about as well as the
# sway and their σ hardly part (docs/learning.md); the turn is the shipped clip these defaults track worst
CLIPS = ["stand_sway", "turn"]
ERROR_TOL_M = 0.005
SURVIVAL_TOL_S = 0.1


def train_and_play(tmp_path, exploration: str) -> dict:
    pack = tmp_path / "pack"
    if not pack.exists():
        pack_motions([str(MOTIONS_DIR / f"{c}.csv") for c in CLIPS], str(pack), robot="g1")
    cfg, env, agent = train_setup(["logger=none", "experiment_name=slow", f"motion.files=[{pack}]",
                                   f"agent.exploration={exploration}"], DEVICE)
    t0 = time.perf_counter()
    epochs = math.ceil(SAMPLES / (cfg.num_envs * agent.num_steps))
    runner = agent.loop(tmp_path / exploration, max_epochs=epochs, log_every=10)
    runner.train()
    log_std = agent.model.actor.log_std.detach().double()
    sigma = log_std.exp().mean(-1) if log_std.dim() == 2 else log_std.exp().mean().expand(len(CLIPS))
    out = {"device": DEVICE, "num_envs": cfg.num_envs, "train_s": time.perf_counter() - t0,
           "samples": agent.step_count}
    if log_std.dim() == 2:  # how consistently the joints part: hard - easy log-std per joint
        d = log_std[1] - log_std[0]
        out["joints_hard_above"] = f"{int((d > 0).sum())}/{d.numel()}"
        out["paired_t"] = float(d.mean() / (d.std() / d.numel() ** 0.5))
    for i, r in enumerate(play_clips(cfg, agent.model, len(CLIPS), device=DEVICE, max_body_error_m=math.inf)):
        out[r.name] = {"sigma": float(sigma[i]), "survival_s": r.survival_s, "length_s": r.length_s,
                       "success": r.success, "body_error_m": r.anchor_body_error_m}
    print(f"{exploration}: {out}", flush=True)
    return out


@pytest.mark.slow
@pytest.mark.timeout(7200)
def test_per_motion_sigma_separates_clips_and_tracks_the_hard_one_at_least_as_well(tmp_path):
    per = train_and_play(tmp_path, "per_motion")
    shared = train_and_play(tmp_path, "shared")
    easy, hard = CLIPS
    assert abs(math.log(per[hard]["sigma"] / per[easy]["sigma"])) >= math.log(1.1), per
    assert per[hard]["survival_s"] >= shared[hard]["survival_s"] - SURVIVAL_TOL_S, (per, shared)
    assert per[hard]["body_error_m"] <= shared[hard]["body_error_m"] + ERROR_TOL_M, (per, shared)
