"""Deterministic tracking evaluation: play a clip from t = 0 and measure survival and tracking error."""

import math

import torch

from simppo.agent.models import PPOModel
from simppo.envs.base import VecEnv
from simppo.kernels.imitation.spec import ERROR_INDEX

_BODY_POS = ERROR_INDEX["body_pos"]


@torch.no_grad()
def play_from_start(policy, env: VecEnv, motion_id: int, max_steps: int) -> dict[str, float]:
    """Run every copy of a humanoid-imitation ``env`` from t = 0 of ``motion_id`` with the mean action
    (:meth:`PPOModel.act_inference`, no exploration noise). ``policy``: a :class:`PPOModel` or a set-up ``PPO``.

    Returns ``survival_s`` (mean time until the first termination, capped at ``max_steps``) and
    ``body_pos_error`` (mean tracked-body distance in metres, anchor-aligned as in the reward, as the env
    writes it in ``env.errors``, averaged over the steps each env survived). Envs that end are auto-reset
    by the env and ignored afterwards.
    """
    model: PPOModel = policy if isinstance(policy, PPOModel) else policy.model
    n = env.num_envs
    obs = env.reset_to(torch.full((n,), motion_id, dtype=torch.int32, device=env.device),
                       torch.zeros(n, device=env.device))
    alive = torch.ones(n, dtype=torch.bool, device=env.device)
    steps = torch.zeros(n, device=env.device)
    err_sum = torch.zeros(n, device=env.device)
    for _ in range(max_steps):
        obs, _, terminated, _, _ = env.step(model.act_inference(obs))
        err = env.errors[:, _BODY_POS]
        err_sum += torch.where(alive, err, torch.zeros_like(err))
        steps += alive.float()
        alive &= ~terminated
    survival = steps * env.dt
    return {
        "survival_s": float(survival.mean()),
        "body_pos_error": float((err_sum / steps.clamp_min(1.0)).mean()),
        "survived_all": float(alive.float().mean()),
        "max_s": max_steps * env.dt if math.isfinite(env.dt) else float("nan"),
    }
