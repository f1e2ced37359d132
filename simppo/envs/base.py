"""The vectorized env API every simppo env follows (all tensors stay on ``env.device``).

``reset() -> obs`` and ``step(actions) -> (obs, reward, terminated, truncated, extras)`` where
- ``obs`` is a dict of ``[num_envs, dim]`` float32 tensors: ``"obs"`` (actor) and ``"critic_obs"``
  (critic; may be the same tensor). Envs that ended during the step are already reset: ``obs`` is
  the first observation of the new episode; ``extras["terminal_obs"]`` holds, for every env, the
  observation dict *before* any reset (equal to ``obs`` for envs that did not end), used to
  bootstrap time-outs.
- ``reward [N]`` float32, ``terminated [N]`` / ``truncated [N]`` bool.
- ``extras["episode"]``: dict of ``[N]`` tensors summed over the episode that just ended (valid where
  ``terminated | truncated``), e.g. ``reward``, ``length`` and per-term sums. An env may also give the
  same statistics as one table, ``extras["episode_table"] = (keys, [N, K] tensor)``; the agent then
  sums all of them in one reduction per step instead of one per key.
- Envs that simulate physics also report ``extras["unstable"]`` (bool ``[N]``: worlds the simulator
  flagged non-finite or exploded in this step; they are terminated with a zero reward and a zero
  terminal observation, then reset) and ``extras["num_unstable"]`` (int ``[1]``, their count, taken
  before the resets). The agent keeps those envs out of its normalizer updates.
Returned tensors are preallocated buffers reused on every step; copy them to keep them.
"""

from abc import ABC, abstractmethod
from dataclasses import dataclass, fields

import torch


@dataclass(frozen=True)
class Symmetry:
    """An env's left-right mirror as signed permutations: the mirror image of a row ``x [B, D]`` is
    ``x[:, index] * sign``. ``obs_*`` over the actor's observation ``[obs_dim]``, ``critic_*`` over the
    critic's ``[critic_obs_dim]``, ``action_*`` over the actions ``[num_actions]`` (long / float32 tensors on
    the env's device). Applying one twice gives the row back."""

    obs_index: torch.Tensor
    obs_sign: torch.Tensor
    critic_index: torch.Tensor
    critic_sign: torch.Tensor
    action_index: torch.Tensor
    action_sign: torch.Tensor

    def to(self, device) -> "Symmetry":
        """The same mirror with every tensor on ``device``."""
        return Symmetry(*(getattr(self, f.name).to(device) for f in fields(self)))

    @staticmethod
    def apply(x: torch.Tensor, index: torch.Tensor, sign: torch.Tensor) -> torch.Tensor:
        """``x [B, D]`` mirrored: ``x[:, index] * sign``."""
        return x.index_select(-1, index) * sign


class VecEnv(ABC):
    num_envs: int
    num_actions: int
    device: str
    obs_dims: dict[str, int]  # {"obs": D, "critic_obs": D'}

    @abstractmethod
    def reset(self) -> dict[str, torch.Tensor]:
        """Reset every env; returns the observation dict."""

    @abstractmethod
    def step(self, actions: torch.Tensor):
        """Advance every env by one control step with ``actions [N, num_actions]``."""

    @abstractmethod
    def get_observations(self) -> dict[str, torch.Tensor]:
        """The current observation dict (no stepping); valid after ``reset`` or ``load_state_dict``."""

    @abstractmethod
    def state_dict(self) -> dict:
        """Everything needed to continue exactly (tensors and plain types)."""

    @abstractmethod
    def load_state_dict(self, state: dict) -> None: ...

    def symmetry(self) -> Symmetry | None:
        """The env's left-right mirror (``agent.symmetry_coef``), or ``None`` where it has none."""
        return None

    def metrics(self) -> dict[str, torch.Tensor]:
        """Env-specific device scalars to log, accumulated since the last call (read once per iteration)."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook
        pass
