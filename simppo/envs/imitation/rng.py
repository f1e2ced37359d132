"""Per-env random states of the imitation env: independent Warp streams of one env seed."""

import numpy as np
import torch

RNG_RANDOMIZATION, RNG_OBS_NOISE, RNG_SAMPLER, RNG_RESET_NOISE = 1, 2, 3, 4  # the streams of one env seed


def rng_states(seed: int, stream: int, num_envs: int, device: str) -> torch.Tensor:
    """``[num_envs]`` distinct uint32 Warp random states (as int32 bits) for ``stream`` of ``seed``."""
    states = np.random.SeedSequence([int(seed), int(stream)]).generate_state(num_envs, dtype=np.uint32)
    return torch.from_numpy(states.view(np.int32).copy()).to(device)


def keyed_rng_states(seed: int, stream: int, keys: list[tuple[int, ...]], device: str) -> torch.Tensor:
    """``[len(keys)]`` Warp random states (as int32 bits), one per key (a tuple of ints): the same ``seed``,
    ``stream`` and key give the same state, whichever env slot it lands in."""
    states = np.array([np.random.SeedSequence([int(seed), int(stream), *map(int, key)]).generate_state(
        1, dtype=np.uint32)[0] for key in keys], dtype=np.uint32)
    return torch.from_numpy(states.view(np.int32).copy()).to(device)
