"""Generalized Advantage Estimation as one Warp kernel: one thread per env, backward sweep over time."""

import torch
import warp as wp

from simppo.utils.device import init_warp, torch_stream_scope, warp_view


@wp.struct
class GaeBuffers:
    """``[num_steps, num_envs]`` float32 views: inputs ``dones`` (1.0 where an episode ended), ``values``,
    ``rewards``, ``next_values``; outputs ``advantages`` and ``returns``."""

    dones: wp.array2d(dtype=wp.float32)
    values: wp.array2d(dtype=wp.float32)
    rewards: wp.array2d(dtype=wp.float32)
    next_values: wp.array2d(dtype=wp.float32)
    advantages: wp.array2d(dtype=wp.float32)
    returns: wp.array2d(dtype=wp.float32)


@wp.kernel
def _gae(gamma: float, tau: float, b: GaeBuffers):
    """Thread ``env`` sweeps t = T-1 … 0.

    delta_t = r_t + gamma * next_values_t - values_t
    A_t     = delta_t + gamma * tau * (1 - dones_t) * A_{t+1}

    # Data in: b.rewards, b.values, b.next_values, b.dones [T, N]
    # Data out: b.advantages, b.returns [T, N] (returns = advantages + values)
    """
    env = wp.tid()
    num_steps = b.values.shape[0]
    last_adv = float(0.0)  # dynamic (mutable) loop variable in Warp
    for i in range(num_steps):
        t = num_steps - 1 - i
        not_done = 1.0 - b.dones[t, env]
        delta = b.rewards[t, env] + gamma * b.next_values[t, env] - b.values[t, env]
        last_adv = delta + gamma * tau * not_done * last_adv
        b.advantages[t, env] = last_adv
        b.returns[t, env] = last_adv + b.values[t, env]


def bind_gae(dones: torch.Tensor, values: torch.Tensor, rewards: torch.Tensor, next_values: torch.Tensor,
             advantages: torch.Tensor, returns: torch.Tensor) -> GaeBuffers:
    """Zero-copy :class:`GaeBuffers` over contiguous float32 ``[num_steps, num_envs]`` tensors (bind once)."""
    init_warp()
    b = GaeBuffers()
    b.dones, b.values, b.rewards = warp_view(dones.detach()), warp_view(values.detach()), warp_view(rewards.detach())
    b.next_values = warp_view(next_values.detach())
    b.advantages, b.returns = warp_view(advantages), warp_view(returns)
    return b


def compute_gae(b: GaeBuffers, gamma: float, tau: float) -> None:
    """Write ``b.advantages`` and ``b.returns`` in place, on torch's current stream (ordered after the
    rollout's torch writes and before the update's reads)."""
    with torch_stream_scope(b.values.device):
        wp.launch(_gae, dim=b.values.shape[1], inputs=[float(gamma), float(tau), b], device=b.values.device)


def discount_values(
    mb_fdones: torch.Tensor,
    mb_values: torch.Tensor,
    mb_rewards: torch.Tensor,
    mb_next_values: torch.Tensor,
    gamma: float,
    tau: float,
) -> torch.Tensor:
    """GAE advantages ``[num_steps, num_envs]`` (seed API). ``dones`` = 1.0 where an episode ended."""
    advantages = torch.empty_like(mb_values, dtype=torch.float32)
    returns = torch.empty_like(advantages)
    inputs = [x.float().contiguous() for x in (mb_fdones, mb_values, mb_rewards, mb_next_values)]
    compute_gae(bind_gae(*inputs, advantages, returns), gamma, tau)
    return advantages
