"""MuJoCo C simulation backend: every world stepped by MuJoCo C (float64) on a pool of threads.

The CPU path of simppo (``sim=mujoco``; ``sim=auto`` picks it on CPU). Design (measured against
``mujoco.rollout``, see ``benchmarks/sim.py``): Python threads pull worlds from a shared counter;
each thread owns one ``MjData`` and, per world, loads the world's float64 state (``mj_setState``),
runs ``mj_step(nstep=decimation)``, stores the state back (``mj_getState``), brings the poses up to
date with the final state (``mj_kinematics``, ``mj_comPos``, ``mj_comVel``) and copies poses and the
contacts of the last substep into shared float32 buffers. MuJoCo's bindings release the GIL in
every ``mj_*`` call, so the threads step in parallel; ``mujoco.rollout`` was not used because it
neither returns the solver warm start (needed to continue exactly) nor the contacts of the last
substep, and its recorded sensors/poses precede the last integration.

Buffers: the float64 state of all worlds lives in one array (``[N, nstate]``: time, qpos, qvel, act,
warm start, ctrl); everything the env reads is a preallocated contiguous float32 CPU tensor that
``state`` (Warp) and the torch views share without copies. Writes to the ``qpos`` / ``qvel`` views
are picked up at the next call (entries that differ from the float32 image of the state replace
it), so the views behave as in :class:`~simppo.sim.mjwarp.MJWarpSim`. The derived views, contacts and
guard use the same kernels as MJWarp (:mod:`simppo.kernels.sim`); the contacts are copied into
MJWarp's flat layout with ``nconmax`` slots and ``njmax`` constraint rows per world.

Differences from ``sim=mjwarp`` (same MJCF, PD servos and options otherwise, and the same sparse constraint
Jacobian: see ``SimCfg.jacobian``): float64 physics;
MuJoCo's automatic reset of diverging worlds (to ``qpos0``) is disabled (``mjDSBL_AUTORESET``) so
that, as in MJWarp, a diverged world keeps its non-finite state and is flagged by the guard; a world
that the guard flags before a step (non-finite, too fast or out of height range, e.g. after a write
through a view) is not stepped, so MuJoCo C is never given NaNs or exploding states: it keeps its
state and stays flagged until it is reset (MJWarp steps it; the env resets flagged worlds anyway).
"""

from __future__ import annotations

import copy
import itertools
import os
import warnings
from concurrent.futures import ThreadPoolExecutor

import mujoco
import numpy as np
import torch
import warp as wp

from simppo.kernels.sim.body_vel import BodyVelBuffers, body_velocities
from simppo.kernels.sim.contact import ContactBuffers, contacts
from simppo.kernels.sim.guard import GuardBuffers, guard
from simppo.robot.config import RobotCfg, load_robot_cfg
from simppo.sim.base import WORLD_PARAM_FIELDS, SimBackend, SimState, WorldParams, world_param_values
from simppo.sim.common import configure_model, geom_foot_map, home_state, robot_collision_geoms, root_height_adr
from simppo.sim.config import SimCfg
from simppo.utils.device import init_warp, resolve_device, warp_view

_S = mujoco.mjtState
STATE_SPEC = int(_S.mjSTATE_FULLPHYSICS) | int(_S.mjSTATE_WARMSTART) | int(_S.mjSTATE_CTRL)
_STEP, _FORWARD, _KINEMATICS = 0, 1, 2


def _state_slice(m: mujoco.MjModel, spec: int, part: int) -> slice:
    """Columns of state component ``part`` (one ``mjtState`` bit) in a state vector of ``spec``."""
    start = mujoco.mj_stateSize(m, spec & (part - 1))
    return slice(start, start + mujoco.mj_stateSize(m, part))


class MuJoCoSim(SimBackend):
    """``num_envs`` worlds stepped by MuJoCo C on ``cfg.threads`` threads (see the module docstring).

    Attributes as :class:`SimBackend`, plus ``threads``, ``state64 [N, nstate]`` (float64, columns
    ``state_cols[name]`` for ``time qpos qvel act qacc_warmstart ctrl``) and ``data`` (one ``MjData``
    per thread, scratch only). ``device`` must be ``cpu``.
    """

    def __init__(
        self,
        robot_cfg: RobotCfg | str,
        sim_cfg: SimCfg | None = None,
        num_envs: int = 1,
        device: str = "cpu",
        mj_model: mujoco.MjModel | None = None,
    ):
        init_warp()
        self.device = resolve_device(device)
        if torch.device(self.device).type != "cpu":
            raise ValueError(f"sim=mujoco runs on the CPU; got device={device!r} (use sim=mjwarp on CUDA)")
        self.wp_device = "cpu"
        self.robot_cfg = load_robot_cfg(robot_cfg)
        self.cfg = c = sim_cfg if sim_cfg is not None else SimCfg()
        self.num_envs = n = int(num_envs)
        self.decimation = int(c.decimation)
        self.mj_model, self.robot = m, robot = configure_model(self.robot_cfg, c, mj_model)
        m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_AUTORESET)
        self.physics_dt = float(m.opt.timestep)
        self.control_dt = self.physics_dt * self.decimation
        mjd, self.home_qpos, self.home_ctrl = home_state(m)
        self.threads = max(1, min(int(c.threads or os.cpu_count() or 1), n))
        self.data = [mjd] + [mujoco.MjData(m) for _ in range(self.threads - 1)]
        self.models = [m] * self.threads  # one copy per thread once worlds have their own parameters
        self.world_params: WorldParams | None = None
        self._world_rows: list[np.ndarray] = []  # per field [N, ...] float32 (the world parameters)
        self._model_fields: list[list[np.ndarray]] = []  # per thread, its model's arrays of the same fields
        self._pool = ThreadPoolExecutor(self.threads - 1) if self.threads > 1 else None

        # --- float64 state of every world (home keyframe)
        nstate = mujoco.mj_stateSize(m, STATE_SPEC)
        self.state64 = np.zeros((n, nstate))
        mujoco.mj_getState(m, mjd, self.state64[0], STATE_SPEC)
        self.state64[1:] = self.state64[0]
        parts = {"time": _S.mjSTATE_TIME, "qpos": _S.mjSTATE_QPOS, "qvel": _S.mjSTATE_QVEL, "act": _S.mjSTATE_ACT,
                 "qacc_warmstart": _S.mjSTATE_WARMSTART, "ctrl": _S.mjSTATE_CTRL}
        self.state_cols = {k: _state_slice(m, STATE_SPEC, int(p)) for k, p in parts.items()}
        self._s64 = {k: self.state64[:, cols] for k, cols in self.state_cols.items()}
        self._rows = list(self.state64)  # row views, made once

        # --- float32 buffers the env reads (torch owns them; numpy and Warp alias them)
        nb, nfeet = m.nbody, len(self.robot_cfg.feet)

        def buf(*shape, dtype=torch.float32):
            return torch.zeros(*shape, dtype=dtype)

        self.qpos, self.qvel, self.ctrl = buf(n, m.nq), buf(n, m.nv), buf(n, m.nu)
        self.xpos, self.xquat = buf(n, nb, 3), buf(n, nb, 4)
        self.cvel, self.subtree_com = buf(n, nb, 6), buf(n, nb, 3)
        self.body_lin_vel_w, self.body_ang_vel_w = buf(n, nb, 3), buf(n, nb, 3)
        self.unstable, self.num_unstable = buf(n, dtype=torch.int32), buf(1, dtype=torch.int32)
        self.penalized_contacts = buf(n)
        self.self_contacts = buf(n)
        self._foot_contact, self._foot_force = buf(n, max(nfeet, 1), dtype=torch.int32), buf(n, max(nfeet, 1))
        self.foot_contact, self.foot_contact_force = self._foot_contact[:, :nfeet], self._foot_force[:, :nfeet]
        self.qpos.copy_(torch.from_numpy(self._s64["qpos"]))
        self.ctrl.copy_(torch.from_numpy(self._s64["ctrl"]))
        self.home_qpos_t = torch.tensor(self.home_qpos, dtype=torch.float32)
        self.home_ctrl_t = torch.tensor(self.home_ctrl, dtype=torch.float32)

        # --- contacts of the last substep, MJWarp's flat layout with fixed slots per world
        nconmax, njmax = c.contact_capacity()
        self.con_slots = slots = int(nconmax or 64)
        self.efc_slots = int(njmax or 6 * slots + m.nv)
        elliptic = int(m.opt.cone) == int(mujoco.mjtCone.mjCONE_ELLIPTIC)
        ncol = 1 if elliptic else 2 * (max(int(m.geom_condim.max()), 2) - 1)
        self._con_geom_t = buf(n * slots, 2, dtype=torch.int32)
        self._con_dim_t = buf(n * slots, dtype=torch.int32)
        self._con_efc_t = torch.full((n * slots, ncol), -1, dtype=torch.int32)
        self._efc_force_t = buf(n, self.efc_slots)
        self._con_geom = self._con_geom_t.numpy().reshape(n, slots, 2)
        self._con_dim = self._con_dim_t.numpy().reshape(n, slots)
        self._con_efc = self._con_efc_t.numpy().reshape(n, slots, ncol)
        self._efc_force = self._efc_force_t.numpy()
        self._efc_cols = np.arange(ncol, dtype=np.int32)
        self._pyramidal = not elliptic
        self._con_rows = list(zip(self._con_geom, self._con_dim, self._con_efc, self._efc_force, strict=True))
        self._overflow = False

        # --- per-call masks (preallocated)
        self._todo = np.ones(n, dtype=bool)
        self._finite = np.zeros((n, nstate), dtype=bool)
        self._reset_mask_t = torch.zeros(n, dtype=torch.bool)
        self._reset_mask = self._reset_mask_t.numpy()
        self._qpos_target = torch.zeros(n, m.nq, dtype=torch.float64)
        self._qvel_target = torch.zeros(n, m.nv, dtype=torch.float64)
        self._scratch = {k: (np.zeros((n, w), dtype=np.float32), np.zeros((n, w), dtype=bool))
                         for k, w in (("qpos", m.nq), ("qvel", m.nv))}
        self._written = np.zeros(n, dtype=bool)
        self._ok = np.zeros(n, dtype=bool)
        self._skip = np.zeros(n, dtype=bool)

        self._bind(m, robot, elliptic)
        self._unstable_np = self.unstable.numpy()
        self._np = {"qpos": self.qpos.numpy(), "qvel": self.qvel.numpy(), "ctrl": self.ctrl.numpy(),
                    "qpos_target": self._qpos_target.numpy(), "qvel_target": self._qvel_target.numpy()}
        self._out_rows = [list(t.numpy()) for t in (self.xpos, self.xquat, self.cvel, self.subtree_com)]
        self._run(_FORWARD)
        self._publish_state()
        self._post(contact=True)

    def _bind(self, m: mujoco.MjModel, robot, elliptic: bool) -> None:
        """Typed Warp buffers over the float32 tensors, bound once."""
        n, c = self.num_envs, self.cfg
        with wp.ScopedDevice("cpu"):
            self.wp_qpos, self.wp_qvel, self.wp_ctrl = (warp_view(t) for t in (self.qpos, self.qvel, self.ctrl))
            self.wp_unstable, self.wp_num_unstable = warp_view(self.unstable), warp_view(self.num_unstable)
            s = self.state = SimState()
            s.qpos, s.qvel, s.ctrl = self.wp_qpos, self.wp_qvel, self.wp_ctrl
            s.xpos, s.xquat = warp_view(self.xpos, wp.vec3), warp_view(self.xquat, wp.vec4)
            s.body_lin_vel_w = warp_view(self.body_lin_vel_w, wp.vec3)
            s.body_ang_vel_w = warp_view(self.body_ang_vel_w, wp.vec3)
            s.unstable, s.penalized_contacts = self.wp_unstable, warp_view(self.penalized_contacts)
            s.self_contacts = warp_view(self.self_contacts)

            bv = self._body_vel = BodyVelBuffers()
            bv.body_rootid = wp.array(m.body_rootid.astype(np.int32), dtype=wp.int32)
            bv.xpos, bv.subtree_com = s.xpos, warp_view(self.subtree_com, wp.vec3)
            bv.cvel = warp_view(self.cvel, wp.spatial_vector)
            bv.lin_vel_w_out, bv.ang_vel_w_out = s.body_lin_vel_w, s.body_ang_vel_w

            g = self._guard = GuardBuffers()
            g.qpos, g.qvel, g.root_height_adr = s.qpos, s.qvel, root_height_adr(m)
            g.max_qvel, g.min_height = c.instability_max_qvel, c.instability_min_height
            g.max_height = c.instability_max_height
            g.unstable_out, g.count_out = self.wp_unstable, self.wp_num_unstable

            slots = self.con_slots
            ct = self._contacts = ContactBuffers()
            ct.nacon = wp.array([n * slots], dtype=wp.int32)
            ct.geom = warp_view(self._con_geom_t, wp.vec2i)
            ct.worldid = wp.array(np.repeat(np.arange(n, dtype=np.int32), slots), dtype=wp.int32)
            ct.dim, ct.efc_address = warp_view(self._con_dim_t), warp_view(self._con_efc_t)
            ct.efc_force = warp_view(self._efc_force_t)
            ct.geom_foot = wp.array(geom_foot_map(m, robot, c.foot_contact), dtype=wp.int32)
            ct.geom_penalized = self.wp_geom_penalized = wp.zeros(m.ngeom, dtype=wp.int32)
            ct.elliptic = int(elliptic)
            ct.foot_contact_out, ct.foot_force_out = warp_view(self._foot_contact), warp_view(self._foot_force)
            ct.penalized_out, ct.self_out = s.penalized_contacts, s.self_contacts
            ct.geom_robot = wp.array(robot_collision_geoms(m).astype(np.int32), dtype=wp.int32)

    # --------------------------------------------------------------- workers
    def _worker(self, tid: int, op: int, worlds) -> None:
        """Process the worlds handed out by ``worlds`` (a shared counter) with this thread's ``MjData``."""
        m, d, spec, n, todo = self.models[tid], self.data[tid], STATE_SPEC, self.num_envs, self._todo
        rows, nstep = self._rows, self.decimation
        xpos_rows, xquat_rows, cvel_rows, com_rows = self._out_rows
        params = list(zip(self._model_fields[tid], self._world_rows, strict=True)) if self._world_rows else ()
        for w in worlds:
            if w >= n:
                return
            if not todo[w]:
                continue
            for dst, src in params:  # this world's parameters into the thread's model copy
                np.copyto(dst, src[w])
            row = rows[w]
            mujoco.mj_setState(m, d, row, spec)
            if op == _FORWARD:
                mujoco.mj_forward(m, d)
                self._copy_contacts(d, w)
            else:
                if op == _STEP:
                    mujoco.mj_step(m, d, nstep)
                    mujoco.mj_getState(m, d, row, spec)
                    self._copy_contacts(d, w)
                mujoco.mj_kinematics(m, d)
                mujoco.mj_comPos(m, d)
                mujoco.mj_comVel(m, d)
            np.copyto(xpos_rows[w], d.xpos)
            np.copyto(xquat_rows[w], d.xquat)
            np.copyto(cvel_rows[w], d.cvel)
            np.copyto(com_rows[w], d.subtree_com)

    def _copy_contacts(self, d: mujoco.MjData, w: int) -> None:
        """Contacts and constraint forces of ``d`` into world ``w``'s slots (unused slots inactive)."""
        geom, dim, efc, force = self._con_rows[w]
        k, nefc = d.ncon, d.nefc
        if k:
            c = d.contact
            if k > self.con_slots:
                k, self._overflow = self.con_slots, True
                c = c[:k]
            np.copyto(geom[:k], c.geom)
            if self._pyramidal:  # the kernel reads dim and more than one row only for pyramidal cones
                np.copyto(dim[:k], c.dim)
                np.add(c.efc_address[:, None], self._efc_cols, out=efc[:k])
            else:
                np.copyto(efc[:k, 0], c.efc_address)
        efc[k:, 0] = -1
        if nefc:
            if nefc > self.efc_slots:
                nefc, self._overflow = self.efc_slots, True
                np.copyto(force[:nefc], d.efc_force[:nefc])
            else:
                np.copyto(force[:nefc], d.efc_force)

    def _run(self, op: int) -> None:
        """Run ``op`` on the worlds marked in ``_todo`` whose state is finite (others are skipped:
        MuJoCo C never sees a NaN), on all threads."""
        np.isfinite(self.state64, out=self._finite)
        np.all(self._finite, axis=1, out=self._ok)
        np.logical_and(self._todo, self._ok, out=self._todo)
        if op != _KINEMATICS:  # worlds not stepped report no contacts
            np.logical_not(self._todo, out=self._skip)
            np.copyto(self._con_efc[:, :, 0], -1, where=self._skip[:, None])
        worlds = itertools.count()
        jobs = [self._pool.submit(self._worker, t, op, worlds) for t in range(1, self.threads)] if self._pool else []
        self._worker(0, op, worlds)
        for j in jobs:
            j.result()
        if self._overflow:
            self._overflow = False
            warnings.warn(f"sim=mujoco: more than nconmax={self.con_slots} contacts or njmax={self.efc_slots} "
                          "constraint rows in a world; the excess is ignored by the contact outputs", stacklevel=3)

    # --------------------------------------------------------------- views
    def _sync_writes(self) -> None:
        """Entries of the ``qpos`` / ``qvel`` views written since the last publish replace the state;
        ``_written [N]`` marks the worlds written. ``ctrl`` is always taken from its view."""
        self._written[:] = False
        for k, (f32, neq) in self._scratch.items():
            s64, view = self._s64[k], self._np[k]
            np.copyto(f32, s64)
            np.not_equal(view, f32, out=neq)
            np.copyto(s64, view, where=neq)
            np.any(neq, axis=1, out=self._ok)
            np.logical_or(self._written, self._ok, out=self._written)
        np.copyto(self._s64["ctrl"], self._np["ctrl"])

    def _publish_state(self) -> None:
        np.copyto(self._np["qpos"], self._s64["qpos"])
        np.copyto(self._np["qvel"], self._s64["qvel"])

    def _post(self, contact: bool) -> None:
        with wp.ScopedDevice("cpu"):
            body_velocities(self._body_vel)
            if contact:
                contacts(self._contacts)
            guard(self._guard)

    # ------------------------------------------------------------------ public
    def step(self) -> None:
        """One control step of every (finite) world: ``decimation`` MuJoCo C steps, then the views."""
        self._sync_writes()
        with wp.ScopedDevice("cpu"):
            guard(self._guard)  # worlds that are already unstable (e.g. written through a view) are not stepped
        np.equal(self._unstable_np, 0, out=self._todo)
        self._run(_STEP)
        self._publish_state()
        self._post(contact=True)

    def forward(self) -> None:
        """``mj_forward`` of every world (poses, contacts, constraint forces), then the views."""
        self._sync_writes()
        self._todo[:] = True
        self._run(_FORWARD)
        self._post(contact=True)

    def kinematics(self) -> None:
        """Body poses and velocities of every world from the current ``qpos`` / ``qvel``."""
        self._sync_writes()
        self._todo[:] = True
        self._run(_KINEMATICS)
        self._post(contact=False)

    def reset_worlds(self, mask: torch.Tensor, qpos_target: torch.Tensor, qvel_target: torch.Tensor) -> None:
        """Worlds where ``mask [N]`` is set get ``qpos_target [N, nq]`` / ``qvel_target [N, nv]``, zero
        warm start / act / time; their views (and those of worlds written through a view) are recomputed.
        The inputs are copied into preallocated buffers."""
        self._reset_mask_t.copy_(mask)
        self._qpos_target.copy_(qpos_target)
        self._qvel_target.copy_(qvel_target)
        self._sync_writes()
        sel = self._reset_mask[:, None]
        s = self._s64
        np.copyto(s["qpos"], self._np["qpos_target"], where=sel)
        np.copyto(s["qvel"], self._np["qvel_target"], where=sel)
        for k in ("qacc_warmstart", "act", "time"):
            np.copyto(s[k], 0.0, where=sel)
        np.logical_or(self._written, self._reset_mask, out=self._todo)
        self._publish_state()
        self._run(_KINEMATICS)
        self._post(contact=False)

    def set_penalized_geoms(self, geom_mask: np.ndarray) -> None:
        self.wp_geom_penalized.assign(np.asarray(geom_mask, dtype=np.int32).reshape(self.mj_model.ngeom))

    def enable_world_params(self) -> WorldParams:
        """The fields of :class:`WorldParams` get float32 ``[N, ...]`` host buffers (Warp views returned) and
        every thread its own ``MjModel`` copy: before a thread steps, resets or recomputes world ``w``, it
        writes row ``w`` of each field into its copy (the same semantics as MJWarp's batched fields)."""
        if self.world_params is None:
            p = WorldParams()
            dtypes = dict(WorldParams.vars)
            values = world_param_values(self.mj_model, self.num_envs)
            tensors = {name: torch.from_numpy(v) for name, v in values.items()}
            with wp.ScopedDevice("cpu"):
                for name, t in tensors.items():
                    dtype = dtypes[name].type.dtype
                    setattr(p, name, warp_view(t, None if dtype == wp.float32 else dtype))
            self._world_rows = [tensors[name].numpy() for name in WORLD_PARAM_FIELDS]
            self.models = [copy.deepcopy(self.mj_model) for _ in range(self.threads)]
            self._model_fields = [[getattr(mt, name) for name in WORLD_PARAM_FIELDS] for mt in self.models]
            self.world_params = p
        return self.world_params

    def state_dict(self) -> dict:
        """``qpos``, ``qvel``, ``qacc_warmstart`` (float64) and ``ctrl`` (float32) copies."""
        s = self._s64
        return {"qpos": torch.from_numpy(s["qpos"].copy()), "qvel": torch.from_numpy(s["qvel"].copy()),
                "ctrl": self.ctrl.clone(), "qacc_warmstart": torch.from_numpy(s["qacc_warmstart"].copy())}

    def load_state_dict(self, state: dict) -> None:
        for k in ("qpos", "qvel", "qacc_warmstart"):
            torch.from_numpy(self._s64[k]).copy_(state[k])
        self.ctrl.copy_(state["ctrl"])
        self._publish_state()
        self.kinematics()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
