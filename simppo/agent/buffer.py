"""Preallocated rollout storage ``[num_steps, num_envs, ...]`` filled in place."""

import torch


class ExperienceBuffer:
    """Named device tensors of shape ``[num_steps, num_envs, *shape]``, allocated once."""

    def __init__(self, num_steps: int, num_envs: int, device: str | torch.device):
        self.num_steps = num_steps
        self.num_envs = num_envs
        self.device = device
        self.store: dict[str, torch.Tensor] = {}

    def register_key(self, key: str, shape: tuple[int, ...] = (), dtype: torch.dtype = torch.float32) -> None:
        if key in self.store:
            raise KeyError(f"experience buffer key '{key}' registered twice")
        self.store[key] = torch.zeros(self.num_steps, self.num_envs, *shape, dtype=dtype, device=self.device)

    def update_data(self, key: str, step: int, value: torch.Tensor) -> None:
        self.store[key][step].copy_(value)

    def __getitem__(self, key: str) -> torch.Tensor:
        return self.store[key]

    def flat(self) -> dict[str, torch.Tensor]:
        """Views ``[num_steps * num_envs, *shape]`` of every key (no copy)."""
        return {k: v.view(self.num_steps * self.num_envs, *v.shape[2:]) for k, v in self.store.items()}
