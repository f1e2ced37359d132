"""Simulator backends behind :class:`SimBackend`; :func:`make_sim` picks one from ``SimCfg.name``.

``MJWarpSim`` is imported on first use (``make_sim`` or ``from simppo.sim import MJWarpSim``): importing
mujoco_warp defines its kernels in Python, seconds of start-up that a process on MuJoCo C never needs.
"""

from __future__ import annotations

import torch

from simppo.robot.config import RobotCfg
from simppo.sim.base import SimBackend, SimState
from simppo.sim.config import SIM_NAMES, SimCfg
from simppo.sim.mujoco_c import MuJoCoSim
from simppo.utils.device import resolve_device


def resolve_sim_name(name: str, device: str) -> str:
    """``auto`` → ``mjwarp`` on CUDA, ``mujoco`` on CPU; other names are checked and returned."""
    if name not in SIM_NAMES:
        raise ValueError(f"sim.name: unknown backend {name!r}; choose one of {list(SIM_NAMES)}")
    if name == "auto":
        return "mjwarp" if torch.device(resolve_device(device)).type == "cuda" else "mujoco"
    return name


def make_sim(robot_cfg: RobotCfg | str, sim_cfg: SimCfg, num_envs: int, device: str) -> SimBackend:
    """The backend named by ``sim_cfg.name`` (see :func:`resolve_sim_name`) with ``num_envs`` worlds."""
    name = resolve_sim_name(sim_cfg.name, device)
    if name == "mjx":  # imported here: jax is an optional extra
        from simppo.sim.mjx import MJXSim

        return MJXSim(robot_cfg, sim_cfg, num_envs=num_envs, device=device)
    cls = _mjwarp_sim_class() if name == "mjwarp" else MuJoCoSim
    return cls(robot_cfg, sim_cfg, num_envs=num_envs, device=device)


def _mjwarp_sim_class() -> type[SimBackend]:
    from simppo.sim.mjwarp import MJWarpSim

    return MJWarpSim


def __getattr__(name: str):
    if name == "MJWarpSim":
        return _mjwarp_sim_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["MJWarpSim", "MuJoCoSim", "SimBackend", "SimCfg", "SimState", "make_sim",
           "resolve_sim_name"]
