"""Learning check of per-motion exploration (issue 12), run by hand::

    pytest -m slow tests/agent/test_per_motion_learning_slow.py -s

An easy clip (``stand_sway``) and a hard one (``squat``) are trained together with the shipped defaults
(``SIMPPO_SLOW_DEVICE``, default auto: 256 envs and MuJoCo C on a CPU, 4096 envs and MJWarp on a GPU), once
with ``agent.exploration=per_motion`` and once with ``shared``, for the same fixed budget of samples
(``SIMPPO_SLOW_PER_MOTION_SAMPLES``; default 3 M on a CPU: 489 PPO iterations of 256 envs, ~17 min per run on
2 cores; 14.7 M on a GPU: 150 iterations of 4096 envs) from the same seed. Then every clip is played from
t = 0 with the mean action. Checks: the learned σ of the two motions differ clearly (≥ 10 %), and tracking of
the hard clip with per-motion σ is at least as good as with the shared σ (survival no shorter, body-position
error no larger, up to a small seed tolerance). Printed too: on how many joints the hard clip's σ is the
larger, and the paired t of the per-joint log-σ differences (the rows' noise is per joint).

Measured on 2 Sapphire Rapids cores (2026-12-01, bf16 MLPs by ``update_precision=auto``, KL guard on), every
clip surviving every play:
- the rows' rate as shipped (``log_std_lr_scale`` 1 x ``exploration.row_lr_factor`` = √2 for two clips):
  this test, **passed**: σ stand_sway 0.241, squat 0.282 (1.17 apart, squat above on 29/29 joints, paired
  t 21); squat body error 0.024 m against 0.023 m shared (σ 0.227), stand_sway 0.009 m against 0.011 m. A
  second run (``log_std_lr_scale=1.4142``, the same rate but for the factor's drift with the rows' sampled
  shares): σ 0.213 / 0.240 (1.12, 29/29, t 15), squat 0.014 m, stand_sway 0.012 m. The sample-weighted σ of
  the rows followed the shared σ's fall (0.321 / 0.333 at iteration 301, 0.286 / 0.294 at 351).
- the same with ``walk`` as the hard clip (3 M samples per run): σ stand_sway 0.270, walk 0.304 (1.12 apart,
  29/29 joints, t 14; shared 0.284); walk survives 5.02 s of 5.0 s in both, body error 0.0282 m against
  0.0283 m shared; stand_sway 0.0105 m against 0.0139 m.
- before the factor, a fixed rate (same pair and budget): at 1x the rows fell *slower* than the shared σ
  (0.257 / 0.295, 1.15 apart) and the squat was tracked worse (0.032 m); at 10x they fell far below it
  (0.169 / 0.184, 1.09 apart) and, without the KL guard, lost tracking (squat 0.049 m: a KL runaway as σ
  reached 0.11; ``agent.target_kl`` came from it). Why (the table's gradient logged per row over 150
  iterations): a row's per-step gradient is ~0.03 of its noise, so Adam moves an entry by ~lr x that
  ratio, and a row fed a share p of the samples has a ratio √p times the shared vector's. At 1x two rows
  moved ~0.6x as fast as the shared σ (√½ = 0.71 predicted); 10x overshot by ~7x; √(1/Σp²) matches them.
- earlier, with ``walk`` as the hard clip and 10x: one H200 at 14.7 M samples passed (σ 0.210 / 0.234, 11 %
  apart; walk 0.032 m against 0.029 m shared); 2 CPU cores at 1.5-4 M samples parted the rows by 6-14 %.
"""

import math
import os
import time

import pytest

from simppo.envs import make_env
from simppo.eval.metrics import clip_steps
from simppo.motion.pack import pack_motions
from simppo.paths import MOTIONS_DIR
from simppo.utils.device import resolve_device
from tests.helpers import play_from_start, train_setup

DEVICE = resolve_device(os.environ.get("SIMPPO_SLOW_DEVICE", "auto"))
# 150 PPO iterations of 4096 envs on a GPU; 3 M samples (489 iterations of 256 envs, ~17 min) on 2 CPU cores
DEFAULT_SAMPLES = 150 * 4096 * 24 if DEVICE.startswith("cuda") else 3_000_000
SAMPLES = int(float(os.environ.get("SIMPPO_SLOW_PER_MOTION_SAMPLES", DEFAULT_SAMPLES)))
CLIPS = ["stand_sway", "squat"]  # easy, hard
COPIES = 4  # deterministic plays per clip
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
    play_env = make_env(cfg.env, COPIES, device=DEVICE, seed=1, robot_cfg=cfg.robot, sim_cfg=cfg.sim,
                        motion_cfg=cfg.motion)
    out = {"device": DEVICE, "num_envs": cfg.num_envs, "train_s": time.perf_counter() - t0,
           "samples": agent.step_count}
    if log_std.dim() == 2:  # how consistently the joints part: hard - easy log-std per joint
        d = log_std[1] - log_std[0]
        out["joints_hard_above"] = f"{int((d > 0).sum())}/{d.numel()}"
        out["paired_t"] = float(d.mean() / (d.std() / d.numel() ** 0.5))
    for i, name in enumerate(CLIPS):
        length = float(play_env.motion_lib.motion_lengths[i])
        r = play_from_start(agent.model, play_env, i, clip_steps(length, play_env.dt))
        out[name] = {"sigma": float(sigma[i]), "survival_s": r["survival_s"], "length_s": length,
                     "body_error_m": r["body_pos_error"]}
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
