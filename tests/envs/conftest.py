import importlib.util

import pytest

from simppo.sim.config import SimCfg

# sim=mjx compiles MJX's calls once per world count (about a minute each on 2 CPU cores): its run of every env test
# is slow (by hand: ``pytest -m slow tests/envs -k mjx``); tests/sim/test_mjx_sim.py and
# tests/envs/test_humanoid_imitation_mjx.py cover it in the default suite
SIM_BACKENDS = ("mjwarp", "mujoco", pytest.param("mjx", marks=[
    pytest.mark.slow, pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="the [mjx] extra")]))


@pytest.fixture(scope="module", params=SIM_BACKENDS)
def sim_cfg(request) -> SimCfg:
    """Every env test runs on each simulator backend."""
    return SimCfg(name=request.param)
