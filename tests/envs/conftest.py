import pytest

from simppo.sim.config import SimCfg

SIM_BACKENDS = ("mjwarp", "mujoco")


@pytest.fixture(scope="module", params=SIM_BACKENDS)
def sim_cfg(request) -> SimCfg:
    """Every env test runs on each simulator backend."""
    return SimCfg(name=request.param)
