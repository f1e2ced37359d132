"""Learning check of per-motion exploration (issue 12), run by hand::

    pytest -m slow tests/agent/test_per_motion_learning_slow.py -s

An easy clip (``stand_sway``) and a hard one (``walk``) are trained together with the shipped defaults
(``SIMPPO_SLOW_DEVICE``, default auto: 256 envs and MuJoCo C on a CPU, 4096 envs and MJWarp on a GPU), once
with ``agent.exploration=per_motion`` and once with ``shared``, for the same fixed budget of samples
(``SIMPPO_SLOW_PER_MOTION_SAMPLES``, default 14.7 M: 150 PPO iterations of 4096 envs, 2,400 of 256) from the
same seed. Then every clip is
played from t = 0 with the mean action. Checks: the learned σ of the two motions differ clearly (≥ 10 %), and
tracking of the hard clip with per-motion σ is at least as good as with the shared σ (survival no shorter,
body-position error no larger, up to a small seed tolerance).

Measured (2026-11-30):
- one H200, the default 14.7 M samples per run (88 s and 77 s of training, 3 min in all): passes. σ per
  motion stand_sway 0.210, walk 0.234 (11 % apart; shared 0.258); walk survival 5.02 s of 5.0 s both, body
  error 0.032 m (per-motion) vs 0.029 m (shared); stand_sway 0.015 vs 0.015 m.
- 2 CPU cores, 1.54 M samples per run (250 iterations, ~23 min per run): fails the σ check. σ stand_sway
  0.275, walk 0.291 (5.7 % apart; shared 0.343); walk survival 5.02 s both, error 0.036 vs 0.038 m. At 0.37 M
  samples the rows had moved 1-3 % from their start. The per-motion run alone at 4 M samples (652 iterations,
  58 min): walk/stand_sway σ ratio 1.08 at 2.1 M, 1.14 at 2.8 M, 1.07 at 4.0 M (σ 0.240 / 0.257; walk
  survives, 0.029 m): the direction holds in every measurement, the size moves between 6 and 14 %. The
  default budget takes ~2.8 h per run on 2 cores (1,470 samples/s since 2026-12-01; not run there).
- 2 CPU cores (2026-12-01), the pair ``stand_sway`` + ``squat``, 3 M samples per run (489 iterations, 34 and
  33 min): the two σ parted further (squat/stand_sway 1.17 at 1.5 M, 1.26 at 2.0 M, 1.18 at 2.5 M, 1.41 at
  3.0 M: σ 0.135 / 0.190), but both rows fell to 0.11-0.13 by 2.6 M and the per-motion run's tracking then
  degraded (reward 565 → 291, training body error 0.013 → 0.061 m) while σ rose again: played from t = 0 both
  clips survive, body error squat 0.049 m / stand_sway 0.032 m against 0.007 / 0.010 m with the shared σ
  (0.173). So this check stays on ``walk``, where per-motion tracking held.
- The same pair and budget with ``agent.log_std_lr_scale=3`` (2026-12-01, 36 min): the rows fell almost as fast
  as at 10x (0.124 / 0.140 at 2.3 M, against 0.135 / 0.154 at 10x and 0.255 shared), bottomed out at ~0.12 and
  rose again (0.136 / 0.157 at 3 M, squat/stand_sway 1.15) while training body error went 0.014 → 0.025 →
  0.019 m; played from t = 0: squat 0.021 m, stand_sway 0.013 m (shared 0.007 / 0.010, 10x 0.049 / 0.032). A
  lower scale softens the loss of tracking but does not remove it. ``shared`` with the same x3 (55 min): σ fell
  smoothly to 0.219 at 2.3 M and 0.155 at 3 M, played 0.008 / 0.007 m: the per-motion rows fall faster than
  the shared σ at the same scale and lose tracking where the shared σ does not.
- Why tracking was lost (2026-12-01, from the runs' ``metrics.csv``): a KL runaway, not σ itself. At the fixed
  actor LR the mean KL of an iteration is 0.02-0.06 early and grows as σ shrinks (a step's KL ~ 1/σ²); the 10x
  per-motion rows reached σ 0.11 at 2.7 M samples, where the KL went 0.10 → 0.82 → 1.7 → 3.7 → 7.1 and, after a
  pause, 11.6 → 101 (iterations 437-452), and tracking fell from 0.013 to 0.061 m. The shared σ (0.18 at that
  point) stayed at KL ≤ 0.1 in all but 14 of 489 iterations. The KL guard ``agent.target_kl=0.15`` (now the
  default) skips an iteration's remaining epochs once an epoch's mean KL exceeds it. The same pair, budget and
  seed, per-motion at 10x with the guard (47 min): max KL 0.30, no loss of tracking (training body error
  0.017 m at 3 M, falling), σ stand_sway 0.112 / squat 0.138 (1.23 apart); played from t = 0: both survive,
  body error squat 0.020 m / stand_sway 0.013 m against 0.049 / 0.032 without the guard and 0.007 / 0.010 m
  shared. The per-motion rows still fall faster than the shared σ and end lower, where each fixed-LR step
  moves the policy further (mean KL ~0.11 in the last 100 iterations against ~0.06 shared): on this pair and
  budget the shared σ still tracks the squat better.
- 2 Sapphire Rapids cores (2026-12-01, bf16 MLPs by ``agent.update_precision=auto``, the KL guard on), the pair
  ``stand_sway`` + ``squat``, 3 M samples per run (489 iterations, 16-20 min each), played from t = 0, every clip
  survives in every run:
  - ``shared``: σ 0.227; body error stand_sway 0.011 m, squat 0.023 m.
  - ``per_motion`` with ``agent.log_std_lr_scale=1`` (the shared σ's rate): the rows fall *slower* than the
    shared σ (stand_sway 0.257, squat 0.295: 1.15 apart, the hard clip exploring more, as the design intends)
    and the squat is tracked worse (0.032 m; stand_sway 0.015 m).
  - ``per_motion`` as shipped (10x): σ stand_sway 0.169, squat 0.184 (1.09 apart: just short of the check's
    1.10) and the squat tracked *better* than with the shared σ (0.020 m against 0.023; stand_sway 0.012 m);
    iteration-mean KL at most 0.24 (shared 0.28, 1x 0.11), the guard trimming 37 of 489 iterations (shared 23):
    in this run the 10x rows did not fall below 0.17.
  At 1x the rows part but the hard clip, exploring more, is tracked worse at this budget; at 10x the squat is
  tracked better but the rows end 9 % apart. A row's Adam step
  does not depend on how many samples the row gets, so the rows move in optimizer steps, not samples: at 256
  envs (CPU) a sample budget holds 16x the Adam steps of the same budget at 4096 envs (GPU), and the 10x rate
  that parts the rows within 150 GPU iterations is the rate that drives them low on a CPU.
"""

import math
import os
import time

import pytest

from simppo.agent.runner import Runner
from simppo.envs import make_env
from simppo.eval.metrics import clip_steps
from simppo.eval.tracking import play_from_start
from simppo.motion.pack import pack_motions
from simppo.paths import MOTIONS_DIR
from simppo.utils.device import resolve_device
from tests.helpers import train_setup

DEVICE = resolve_device(os.environ.get("SIMPPO_SLOW_DEVICE", "auto"))
SAMPLES = int(float(os.environ.get("SIMPPO_SLOW_PER_MOTION_SAMPLES", 150 * 4096 * 24)))
CLIPS = ["stand_sway", "walk"]  # easy, hard
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
    runner = Runner(agent, tmp_path / exploration, max_epochs=epochs, log_every=10)
    runner.train()
    sigma = agent.model.actor.log_std.detach().exp()
    sigma = sigma.mean(-1) if sigma.dim() == 2 else sigma.mean().expand(len(CLIPS))
    play_env = make_env(cfg.env, COPIES, device=DEVICE, seed=1, robot_cfg=cfg.robot, sim_cfg=cfg.sim,
                        motion_cfg=cfg.motion)
    out = {"device": DEVICE, "num_envs": cfg.num_envs, "train_s": time.perf_counter() - t0,
           "samples": agent.step_count}
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
