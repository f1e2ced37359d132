"""Mirror symmetry in the PPO update (``agent.symmetry_coef``, ``agent.symmetry_augment``; rsl_rl's mirror loss
and data augmentation). The minibatch holds normalised observations, and the running statistics are not mirror
symmetric, so a row is mirrored where the env's mirror applies, in the env's units: denormalised, mirrored,
normalised again."""

from __future__ import annotations

import torch

from simppo.agent.normalizers import RunningMeanStd
from simppo.envs.base import Symmetry


def mirror_rows(x: torch.Tensor, index: torch.Tensor, sign: torch.Tensor, norm: RunningMeanStd | None
                ) -> torch.Tensor:
    """The mirror image of normalised observation rows ``x [B, D]`` (``norm``: their normaliser; ``None``: raw)."""
    if norm is None:
        return Symmetry.apply(x, index, sign)
    return norm.normalize(Symmetry.apply(norm.denormalize(x), index, sign))


# what the mirror changes in a sample; every other key (advantages, returns, values, log-probs, rows, ...) is the
# same for the mirror image
_MIRRORED = ("obs", "critic_obs", "actions", "mean", "log_std")


def mirror_augmented(batch: dict[str, torch.Tensor], sym: Symmetry, obs_norm: RunningMeanStd | None = None,
                     critic_obs_norm: RunningMeanStd | None = None) -> dict[str, torch.Tensor]:
    """``batch`` (``[B, ...]`` per key) followed by its mirror image (``[2B, ...]``); ``obs_norm`` /
    ``critic_obs_norm``: the normalisers of its observations (``None``: raw). The mirror image of a sample is scored
    against the mirror image of the rollout policy: its mean mirrored, its σ permuted, so its old log-probability
    is the sample's own (the Gaussian's terms are only permuted)."""
    mirrored = {
        "obs": mirror_rows(batch["obs"], sym.obs_index, sym.obs_sign, obs_norm),
        "critic_obs": mirror_rows(batch["critic_obs"], sym.critic_index, sym.critic_sign, critic_obs_norm),
        "actions": Symmetry.apply(batch["actions"], sym.action_index, sym.action_sign),
        "mean": Symmetry.apply(batch["mean"], sym.action_index, sym.action_sign),
        "log_std": batch["log_std"].index_select(-1, sym.action_index),
    }
    return {k: torch.cat([v, mirrored[k] if k in _MIRRORED else v]) for k, v in batch.items()}
