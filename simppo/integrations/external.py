"""The base of simppo ``VecEnv``s over another library's env (gymnasium, TorchRL)."""

from __future__ import annotations

from simppo.envs.base import VecEnv


class ExternalVecEnv(VecEnv):
    """An env whose state belongs to another library: checkpoints hold the agent's state only, and a resumed run
    starts new episodes."""

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        self.reset()
