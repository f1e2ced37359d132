"""Periodic deterministic evaluation during training: every motion of the training set played from t = 0
with the policy's mean action on a small separate env (``simppo-train eval_every=K``)."""

from __future__ import annotations

import re

import torch

from simppo.eval.loading import build_eval_env
from simppo.eval.metrics import MotionResult, evaluate_motions, summarize


def evaluate_policy(env, model) -> list:
    """Every motion of ``env`` played from t = 0 with ``model``'s mean action (:func:`evaluate_motions`), without
    touching the training: the model's train/eval mode and torch's random streams are restored afterwards."""
    training = model.training
    model.eval()
    rng = torch.get_rng_state()  # the evaluation must not change the training's random stream
    cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    try:
        return evaluate_motions(env, model.act_inference)
    finally:
        torch.set_rng_state(rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state_all(cuda_rng)
        model.train(training)


class PeriodicEvaluator:
    """``evaluator(model) -> {"eval/...": float}``: survival fraction, success rate, MPJPE and, per motion,
    survival time and body-position error; ``eval/score`` (survival fraction − mean body error in metres:
    1 cm of error weighs as much as 1% of the clips survived) decides ``score_based.ckpt``.

    ``max_envs`` motions are played at a time (the motion set runs in rounds); per-motion keys are logged for
    at most ``max_logged_motions`` motions.

    ``motion.chunk=rank`` with several ranks: build it on every rank (``every_rank``); each rank plays its own
    share of the motions and global rank 0 receives every rank's results, so the metrics cover every motion.
    """

    def __init__(self, cfg, device: str, max_envs: int = 16, max_logged_motions: int = 32):
        index = cfg.motion.load_index()  # with motion.chunk=rank: this rank's share
        self.every_rank = index.rank_shards is not None
        self.env = build_eval_env(cfg, max(1, min(max_envs, index.num_motions)), device)
        self.max_logged_motions = max_logged_motions

    def __call__(self, model) -> dict[str, float] | None:
        """The metrics (on global rank 0; ``None`` on the other ranks of a chunked evaluation)."""
        results = evaluate_policy(self.env, model)
        if self.every_rank:
            from simppo.agent.distributed import gather_objects

            parts = gather_objects([r.to_json() for r in results], dst=0)
            if parts is None:
                return None
            results = [MotionResult.from_json(d) for part in parts for d in part]
        s = summarize(results)
        body_error_m = (s["mpjpe_global_mm"] or 0.0) / 1000.0
        out = {"eval/survival_fraction": s["survival_fraction"], "eval/success_rate": s["success_rate"],
               "eval/body_error_m": body_error_m, "eval/mpjpe_local_mm": s["mpjpe_local_mm"] or 0.0,
               "eval/score": s["survival_fraction"] - body_error_m}
        for r in results[:self.max_logged_motions]:
            key = re.sub(r"[^A-Za-z0-9_.-]", "_", r.name)
            out[f"eval/{key}/survival_s"] = r.survival_s
            out[f"eval/{key}/body_error_m"] = r.mpjpe_global_mm / 1000.0
        return out

    def close(self) -> None:
        self.env.close()
