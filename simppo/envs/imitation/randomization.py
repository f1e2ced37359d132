"""Domain randomization of ``env=humanoid_imitation`` (``env/randomization=none|deploy``).

:class:`Randomizer` turns a :class:`~simppo.envs.imitation.config.RandomizationCfg` into the typed buffers
of :mod:`simppo.kernels.imitation.randomization`, owns each env's random state and push timer, and asks the
simulator for per-world model parameters (:meth:`~simppo.sim.base.SimBackend.enable_world_params`) when a
model term (friction, centre of mass, masses, PD gains) is on. The env calls :meth:`Randomizer.reset` for
the envs it resets and :meth:`Randomizer.push` before each physics step; neither reads anything back.
"""

from __future__ import annotations

import numpy as np
import torch
import warp as wp

from simppo.envs.imitation.config import RandomizationCfg
from simppo.envs.imitation.rng import RNG_RANDOMIZATION, rng_states
from simppo.kernels.imitation.randomization import RandomizationBuffers, RandomizationParams, push, randomize
from simppo.sim.base import WORLD_PARAM_FIELDS, SimBackend, nominal_world_params
from simppo.sim.common import geom_foot_map
from simppo.utils.device import warp_view


def _range(cfg: RandomizationCfg, key: str, size: int = 2, low: float | None = None) -> list[float] | None:
    """``cfg.<key>`` checked: ``size`` numbers, ``lo <= hi`` (pairs), none below ``low``; ``None`` = off."""
    value = getattr(cfg, key)
    if value is None:
        return None
    value = [float(v) for v in value]
    if len(value) != size:
        raise ValueError(f"env.randomization.{key}: expected {size} numbers, got {value}")
    if size == 2 and value[0] > value[1]:
        raise ValueError(f"env.randomization.{key}: lo > hi in {value}")
    if low is not None and min(value) < low:
        raise ValueError(f"env.randomization.{key}: values below {low} in {value}")
    return value


def _vec_range(cfg: RandomizationCfg, lo_key: str, hi_key: str) -> tuple[list[float], list[float]] | None:
    lo, hi = _range(cfg, lo_key, 3), _range(cfg, hi_key, 3)
    if (lo is None) != (hi is None):
        raise ValueError(f"env.randomization: set both {lo_key} and {hi_key}, or neither")
    if lo is None:
        return None
    if any(a > b for a, b in zip(lo, hi, strict=True)):
        raise ValueError(f"env.randomization: {lo_key} {lo} exceeds {hi_key} {hi}")
    return lo, hi


class Randomizer:
    """Per-env domain randomization of ``num_envs`` worlds of ``sim`` (see the module docstring).

    ``default_joint_pos [N, A]`` and ``action_delay [N]`` are the env's buffers it writes; ``anchor_id`` the
    default ``com_body``. Attributes: ``enabled`` (any term on), ``model_terms`` (a per-world model field is
    drawn), ``pushes`` (pushes on), ``history`` (action-history slots the env keeps: max delay + 1), and the
    torch views ``rng``, ``push_timer``, ``push_count [N]``."""

    def __init__(self, cfg: RandomizationCfg, sim: SimBackend, default_joint_pos: torch.Tensor,
                 action_delay: torch.Tensor, anchor_id: int, seed: int):
        n, device, m = sim.num_envs, sim.device, sim.mj_model
        friction = _range(cfg, "foot_friction", low=0.0)
        offset = _range(cfg, "joint_pos_offset")
        com = _vec_range(cfg, "com_offset_lo", "com_offset_hi")
        mass = _range(cfg, "link_mass_scale", low=1e-3)
        kp, kd = _range(cfg, "kp_scale", low=0.0), _range(cfg, "kd_scale", low=0.0)
        delay = _range(cfg, "action_delay_steps", low=0.0)
        interval = _range(cfg, "push_interval_s", low=1e-3)
        push_lin = _vec_range(cfg, "push_lin_vel_lo", "push_lin_vel_hi")
        push_ang = _vec_range(cfg, "push_ang_vel_lo", "push_ang_vel_hi")
        if delay is not None and any(d != int(d) for d in delay):
            raise ValueError(f"env.randomization.action_delay_steps: whole control steps expected, got {delay}")
        com_body = anchor_id
        if cfg.com_body:
            com_body = mujoco_body_id(m, cfg.com_body)
        foot_geoms = np.nonzero(geom_foot_map(m, sim.robot) >= 0)[0].astype(np.int32)
        if friction is not None and foot_geoms.size == 0:
            raise ValueError("env.randomization.foot_friction: the robot has no colliding foot geoms (robot.feet)")

        self.model_terms = any(x is not None for x in (friction, com, mass, kp, kd))
        self.pushes = interval is not None
        self.enabled = self.model_terms or self.pushes or offset is not None or delay is not None
        self.history = int(delay[1]) + 1 if delay is not None else 1
        self.sim = sim
        i32 = {"dtype": torch.int32, "device": device}
        self.rng = rng_states(seed, RNG_RANDOMIZATION, n, device)
        self.push_timer = torch.zeros(n, dtype=torch.float32, device=device)
        self.push_count = torch.zeros(n, **i32)

        def on(x) -> int:
            return int(x is not None)

        p = self.params = RandomizationParams()
        p.nominal = nominal_world_params(m, sim.wp_device)
        p.default_joint_pos = wp.array(np.asarray(sim.robot.default_joint_pos, dtype=np.float32), dtype=wp.float32,
                                       device=sim.wp_device)
        p.foot_geoms = wp.array(foot_geoms, dtype=wp.int32, device=sim.wp_device)
        p.body_parentid = wp.array(m.body_parentid.astype(np.int32), dtype=wp.int32, device=sim.wp_device)
        p.friction_on, (p.friction_lo, p.friction_hi) = on(friction), friction or (0.0, 0.0)
        p.offset_on, (p.offset_lo, p.offset_hi) = on(offset), offset or (0.0, 0.0)
        p.com_on, p.com_body = on(com), int(com_body)
        p.com_lo, p.com_hi = (wp.vec3(*v) for v in (com or ([0.0] * 3, [0.0] * 3)))
        p.mass_on, (p.mass_lo, p.mass_hi) = on(mass), mass or (1.0, 1.0)
        p.kp_on, (p.kp_lo, p.kp_hi) = on(kp), kp or (1.0, 1.0)
        p.kd_on, (p.kd_lo, p.kd_hi) = on(kd), kd or (1.0, 1.0)
        p.delay_on, (p.delay_lo, p.delay_hi) = on(delay), tuple(int(d) for d in (delay or (0, 0)))
        p.push_on, (p.push_interval_lo, p.push_interval_hi) = on(interval), interval or (0.0, 0.0)
        lin = push_lin or ([0.0] * 3, [0.0] * 3)
        ang = push_ang or ([0.0] * 3, [0.0] * 3)
        p.push_lin_lo, p.push_lin_hi = wp.vec3(*lin[0]), wp.vec3(*lin[1])
        p.push_ang_lo, p.push_ang_hi = wp.vec3(*ang[0]), wp.vec3(*ang[1])
        p.dt = float(sim.control_dt)

        b = self.buffers = RandomizationBuffers()
        b.rng = warp_view(self.rng, wp.uint32)
        b.push_timer, b.push_count = warp_view(self.push_timer), warp_view(self.push_count)
        # without a model term nothing writes the world parameters: the nominal ones stand in
        b.world = sim.enable_world_params() if self.model_terms else p.nominal
        b.default_joint_pos, b.action_delay = warp_view(default_joint_pos), warp_view(action_delay)

    def reset(self, mask_wp: wp.array) -> None:
        """New draws for the envs in ``mask [N]`` (call before the simulator resets them)."""
        if self.enabled:
            randomize(self.params, mask_wp, self.buffers)

    def push(self, sim_state) -> None:
        """One control step of the push timers (kicks ``sim.qvel`` of the envs whose timer ran out)."""
        if self.pushes:
            push(self.params, self.buffers, sim_state)

    def world_tensors(self) -> dict[str, torch.Tensor]:
        """Torch views ``[N, ...]`` of the simulator's per-world parameters (empty without model terms)."""
        if not self.model_terms:
            return {}
        return {name: wp.to_torch(getattr(self.buffers.world, name)) for name in WORLD_PARAM_FIELDS}

    def state_dict(self) -> dict:
        out = {"rng": self.rng.clone(), "push_timer": self.push_timer.clone(), "push_count": self.push_count.clone()}
        out.update({f"world.{k}": v.clone() for k, v in self.world_tensors().items()})
        return out

    def load_state_dict(self, state: dict) -> None:
        for key in ("rng", "push_timer", "push_count"):
            getattr(self, key).copy_(state[key])
        for k, v in self.world_tensors().items():
            if f"world.{k}" in state:
                v.copy_(state[f"world.{k}"])


def mujoco_body_id(m, name: str) -> int:
    import mujoco

    bid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, name)
    if bid < 1:
        raise ValueError(f"env.randomization.com_body: no robot body named {name!r}")
    return int(bid)
