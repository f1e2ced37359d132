"""Simulation backends (``sim=mjwarp`` is the default)."""

from simppo.sim.config import MJWarpSimCfg, load_sim_cfg, sim_cfg_from_dict
from simppo.sim.mjwarp import MJWarpSim

__all__ = ["MJWarpSim", "MJWarpSimCfg", "load_sim_cfg", "sim_cfg_from_dict"]
