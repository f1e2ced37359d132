"""Deterministic tracking evaluation: play a clip from t = 0 and measure survival and tracking error."""

import math

import torch

from simppo.envs.humanoid_imitation import HumanoidImitationEnv
from simppo.kernels.imitation_rewards import REWARD_TERMS

_BODY_POS = REWARD_TERMS.index("body_pos")


@torch.no_grad()
def play_from_start(agent, env: HumanoidImitationEnv, motion_id: int, max_steps: int) -> dict[str, float]:
    """Run every env copy from t = 0 of ``motion_id`` with the mean action (no exploration noise).

    Returns ``survival_s`` (mean time until the first termination, capped at ``max_steps``) and
    ``body_pos_error`` (root-mean-square tracked-body position error in metres, anchor-aligned as in the
    reward, averaged over the steps each env survived). Envs that end are auto-reset by the env and
    ignored afterwards.
    """
    n = env.num_envs
    obs = env.reset_to(torch.full((n,), motion_id, dtype=torch.int32, device=env.device),
                       torch.zeros(n, device=env.device))
    alive = torch.ones(n, dtype=torch.bool, device=env.device)
    steps = torch.zeros(n, device=env.device)
    err_sum = torch.zeros(n, device=env.device)
    sigma_sq = env.cfg.sigmas.body_pos ** 2
    for _ in range(max_steps):
        actor_obs, _ = agent.normalized_obs(obs, update=False)
        mean, _ = agent.actor(actor_obs)
        obs, _, terminated, _, _ = env.step(mean)
        term = env.reward_terms[:, _BODY_POS].clamp_min(1e-30)
        mean_sq_err = -sigma_sq * torch.log(term)
        err_sum += torch.where(alive, mean_sq_err.sqrt(), torch.zeros_like(term))
        steps += alive.float()
        alive &= ~terminated
    survival = steps * env.dt
    return {
        "survival_s": float(survival.mean()),
        "body_pos_error": float((err_sum / steps.clamp_min(1.0)).mean()),
        "survived_all": float(alive.float().mean()),
        "max_s": max_steps * env.dt if math.isfinite(env.dt) else float("nan"),
    }
