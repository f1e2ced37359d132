"""PPO loss pieces as pure functions. Shapes: ``[B]`` per sample, ``[B, A]`` per action dim."""

import math

import torch

LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def gaussian_log_prob(actions: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """Log-density of a diagonal Gaussian, summed over the action dim → ``[B]``."""
    z = (actions - mean) * torch.exp(-log_std)
    return (-0.5 * z.square() - log_std - LOG_SQRT_2PI).sum(-1)


def gaussian_entropy(log_std: torch.Tensor) -> torch.Tensor:
    """Entropy of a diagonal Gaussian summed over the action dim (``log_std`` ``[B, A]``) → ``[B]``."""
    return (log_std + 0.5 + LOG_SQRT_2PI).sum(-1)


def gaussian_kl(mean_old, log_std_old, mean_new, log_std_new) -> torch.Tensor:
    """KL(old || new) of diagonal Gaussians summed over the action dim → ``[B]``."""
    var_old = torch.exp(2.0 * log_std_old)
    var_new = torch.exp(2.0 * log_std_new)
    kl = log_std_new - log_std_old + (var_old + (mean_old - mean_new).square()) / (2.0 * var_new) - 0.5
    return kl.sum(-1)


def clipped_surrogate_loss(
    logp_new: torch.Tensor, logp_old: torch.Tensor, advantages: torch.Tensor, e_clip: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """PPO-clip actor loss. Returns ``(loss [B], ratio [B], clipped [B] float 0/1)``."""
    ratio = torch.exp(logp_new - logp_old)
    surr1 = advantages * ratio
    surr2 = advantages * torch.clamp(ratio, 1.0 - e_clip, 1.0 + e_clip)
    loss = -torch.minimum(surr1, surr2)
    clipped = ((ratio - 1.0).abs() > e_clip).float()
    return loss, ratio, clipped


def value_loss(
    values_new: torch.Tensor,
    values_old: torch.Tensor,
    returns: torch.Tensor,
    clip_value: bool,
    value_clip: float,
) -> torch.Tensor:
    """Squared value error ``[B]``; clipped form takes the max of clipped and unclipped errors."""
    unclipped = (values_new - returns).square()
    if not clip_value:
        return unclipped
    values_clipped = values_old + torch.clamp(values_new - values_old, -value_clip, value_clip)
    return torch.maximum(unclipped, (values_clipped - returns).square())


def bounds_loss(mean: torch.Tensor, limit: float = 1.0) -> torch.Tensor:
    """Quadratic penalty on action means beyond ``±limit`` → ``[B]``."""
    high = torch.clamp_min(mean - limit, 0.0).square()
    low = torch.clamp_max(mean + limit, 0.0).square()
    return (high + low).sum(-1)


def entropy_bonus_loss(entropy: torch.Tensor, coef: float) -> torch.Tensor:
    """Term added to the actor loss: ``-coef * entropy`` (minimising it raises entropy)."""
    return -coef * entropy


def l2c2_loss(mean_clean: torch.Tensor, mean_noisy: torch.Tensor) -> torch.Tensor:
    """L2C2 smoothness (Kobayashi 2022): squared distance of policy means under input noise → ``[B]``."""
    return (mean_noisy - mean_clean).square().sum(-1)


def symmetry_loss(mirrored_mean: torch.Tensor, mirrored_target: torch.Tensor) -> torch.Tensor:
    """Mirror symmetry: mean squared distance ``[B]`` between the policy mean on mirrored observations and the
    mirror image of the policy mean (rsl_rl's mirror loss, per sample)."""
    return (mirrored_mean - mirrored_target).square().mean(-1)


def explained_variance(values: torch.Tensor, returns: torch.Tensor) -> torch.Tensor:
    """``1 - Var[returns - values] / Var[returns]`` as a 0-dim tensor (no host sync)."""
    var_y = returns.var()
    return 1.0 - (returns - values).var() / var_y.clamp_min(1e-8)
