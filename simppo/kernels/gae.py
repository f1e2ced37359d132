"""Generalized Advantage Estimation as one Warp kernel: one thread per env, backward sweep over time."""

import torch
import warp as wp

from simppo.utils.device import warp_device


@wp.kernel
def gae_kernel(
    dones: wp.array2d(dtype=wp.float32),
    values: wp.array2d(dtype=wp.float32),
    rewards: wp.array2d(dtype=wp.float32),
    next_values: wp.array2d(dtype=wp.float32),
    gamma: float,
    tau: float,
    advantages_out: wp.array2d(dtype=wp.float32),
    returns_out: wp.array2d(dtype=wp.float32),
):
    """All arrays are ``[num_steps, num_envs]``; thread ``env`` sweeps t = T-1 … 0.

    delta_t = r_t + gamma * next_values_t - values_t
    A_t     = delta_t + gamma * tau * (1 - dones_t) * A_{t+1}
    """
    env = wp.tid()
    num_steps = values.shape[0]
    last_adv = float(0.0)  # dynamic (mutable) loop variable in Warp
    for i in range(num_steps):
        t = num_steps - 1 - i
        not_done = 1.0 - dones[t, env]
        delta = rewards[t, env] + gamma * next_values[t, env] - values[t, env]
        last_adv = delta + gamma * tau * not_done * last_adv
        advantages_out[t, env] = last_adv
        returns_out[t, env] = last_adv + values[t, env]


def launch_gae(
    dones: torch.Tensor,
    values: torch.Tensor,
    rewards: torch.Tensor,
    next_values: torch.Tensor,
    gamma: float,
    tau: float,
    advantages_out: torch.Tensor,
    returns_out: torch.Tensor,
) -> None:
    """Write advantages and returns ``[num_steps, num_envs]`` float32 in place (zero-copy views)."""
    num_envs = values.shape[1]
    wp.launch(
        gae_kernel,
        dim=num_envs,
        inputs=[
            wp.from_torch(dones.detach(), dtype=wp.float32),
            wp.from_torch(values.detach(), dtype=wp.float32),
            wp.from_torch(rewards.detach(), dtype=wp.float32),
            wp.from_torch(next_values.detach(), dtype=wp.float32),
            float(gamma),
            float(tau),
        ],
        outputs=[
            wp.from_torch(advantages_out, dtype=wp.float32),
            wp.from_torch(returns_out, dtype=wp.float32),
        ],
        device=warp_device(values.device),
    )


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
    launch_gae(
        mb_fdones.float().contiguous(),
        mb_values.float().contiguous(),
        mb_rewards.float().contiguous(),
        mb_next_values.float().contiguous(),
        gamma,
        tau,
        advantages,
        returns,
    )
    return advantages
