"""Mirror-symmetry data augmentation of a PPO minibatch (``agent.symmetry_augment``; rsl_rl's
``use_data_augmentation``): every sample is trained on twice, as it was and as its left-right mirror image."""

from __future__ import annotations

import torch

from simppo.envs.base import Symmetry

# what the mirror changes in a sample; every other key (advantages, returns, values, log-probs, rows, ...) is the
# same for the mirror image
_MIRRORED = ("obs", "critic_obs", "actions", "mean", "log_std")


def mirror_augmented(batch: dict[str, torch.Tensor], sym: Symmetry) -> dict[str, torch.Tensor]:
    """``batch`` (``[B, ...]`` per key) followed by its mirror image (``[2B, ...]``). The mirror image of a sample
    is scored against the mirror image of the rollout policy: its mean mirrored, its σ permuted, so its old
    log-probability is the sample's own (the Gaussian's terms are only permuted)."""
    mirrored = {
        "obs": Symmetry.apply(batch["obs"], sym.obs_index, sym.obs_sign),
        "critic_obs": Symmetry.apply(batch["critic_obs"], sym.critic_index, sym.critic_sign),
        "actions": Symmetry.apply(batch["actions"], sym.action_index, sym.action_sign),
        "mean": Symmetry.apply(batch["mean"], sym.action_index, sym.action_sign),
        "log_std": batch["log_std"].index_select(-1, sym.action_index),
    }
    return {k: torch.cat([v, mirrored[k] if k in _MIRRORED else v]) for k, v in batch.items()}
