"""MuJoCo Warp simulation backend: ``num_envs`` worlds of one robot, zero-copy torch views.

On CUDA (``SimCfg.use_cuda_graph`` and Warp's memory pool enabled) each hot-path launch sequence is
captured once as a CUDA graph and replayed: the decimated step, the masked reset, ``forward`` and
``kinematics``. Graphs are captured on a private stream (torch's default stream cannot be captured) and
replayed on torch's current stream, so torch ops and Warp launches are ordered without host syncs. On
CPU the same launches run eagerly. Without capture on CUDA, mujoco_warp's solver loop is unrolled
(``opt.graph_conditional = False``): its ``capture_while`` would read the loop condition back to the host
on every solver iteration.
"""

from __future__ import annotations

import contextlib

import mujoco
import mujoco_warp as mjw
import numpy as np
import torch
import warp as wp

from simppo.kernels.sim.body_vel import BodyVelBuffers, body_velocities
from simppo.kernels.sim.contact import ContactBuffers, contacts
from simppo.kernels.sim.guard import GuardBuffers, guard
from simppo.kernels.sim.overflow import OverflowBuffers, collect_overflow
from simppo.kernels.sim.reset import ResetBuffers, reset
from simppo.kernels.sim.solver_stats import SolverStatsBuffers, accumulate_solver_stats
from simppo.robot.config import RobotCfg, load_robot_cfg
from simppo.sim.base import SimBackend, SimState, WorldParams, world_param_values
from simppo.sim.common import configure_model, geom_foot_map, home_state, robot_collision_geoms, root_height_adr
from simppo.sim.config import SimCfg
from simppo.utils.device import (
    graph_capture_available,
    init_warp,
    resolve_device,
    torch_stream_scope,
    warp_device,
    warp_view,
)

# Solver / line-search iteration caps are normal for falling robots (MuJoCo C is silent about them too):
# they are neither printed nor counted in ``env/overflow``; every buffer overflow is.
QUIET_OVERFLOWS = int(mjw.OverflowType.ITERATIONS | mjw.OverflowType.LS_ITERATIONS)


class MJWarpSim(SimBackend):
    """Batched MuJoCo Warp simulation of ``num_envs`` copies of a robot (see :class:`SimBackend`).

    The torch views are MJWarp's own arrays (``qpos``, ``qvel``, ``ctrl``, ``xpos``, ``xquat`` alias
    ``data.*``); the derived views are computed by :mod:`simppo.kernels.sim` after every step / reset.
    Extra views: ``overflow [N]`` int32, MJWarp's overflow bits of the last control step
    (:class:`mujoco_warp.OverflowType`). ``use_graph``: whether launches are captured (see the module).
    """

    def __init__(
        self,
        robot_cfg: RobotCfg | str,
        sim_cfg: SimCfg | None = None,
        num_envs: int = 1,
        device: str = "auto",
        mj_model: mujoco.MjModel | None = None,
    ):
        init_warp()
        self.robot_cfg = load_robot_cfg(robot_cfg)
        self.cfg = sim_cfg if sim_cfg is not None else SimCfg()
        self.num_envs = n = int(num_envs)
        self.device = resolve_device(device)
        self.wp_device = warp_device(self.device)
        self.decimation = int(self.cfg.decimation)
        self.mj_model, self.robot = m, robot = configure_model(self.robot_cfg, self.cfg, mj_model)
        self.physics_dt = float(m.opt.timestep)
        self.control_dt = self.physics_dt * self.decimation
        mjd, self.home_qpos, self.home_ctrl = home_state(m)
        nfeet = len(self.robot_cfg.feet)

        self.use_graph = graph_capture_available(self.wp_device, bool(self.cfg.use_cuda_graph))
        with wp.ScopedDevice(self.wp_device):
            self.model = mjw.put_model(m)
            self.model.opt.warn_overflow = int(self.model.opt.warn_overflow) & ~QUIET_OVERFLOWS
            if wp.get_device(self.wp_device).is_cuda and not self.use_graph:
                self.model.opt.graph_conditional = False  # no capture_while host read-back per solver iteration
            nconmax, njmax = self.cfg.contact_capacity()
            self.data = d = mjw.put_data(m, mjd, nworld=n, nconmax=nconmax, njmax=njmax)
            self.wp_body_lin_vel_w = wp.zeros((n, m.nbody), dtype=wp.vec3)
            self.wp_body_ang_vel_w = wp.zeros((n, m.nbody), dtype=wp.vec3)
            self.wp_unstable = wp.zeros(n, dtype=wp.int32)
            self.wp_num_unstable = wp.zeros(1, dtype=wp.int32)
            self.wp_penalized_contacts = wp.zeros(n, dtype=wp.float32)
            self.wp_self_contacts = wp.zeros(n, dtype=wp.float32)
            self.wp_geom_robot = wp.array(robot_collision_geoms(m).astype(np.int32), dtype=wp.int32)
            self.wp_foot_contact = wp.zeros((n, max(nfeet, 1)), dtype=wp.int32)
            self.wp_foot_contact_force = wp.zeros((n, max(nfeet, 1)), dtype=wp.float32)
            self.wp_geom_foot = wp.array(geom_foot_map(m, robot, self.cfg.foot_contact), dtype=wp.int32)
            self.wp_geom_penalized = wp.zeros(m.ngeom, dtype=wp.int32)
            self.wp_body_rootid = wp.array(m.body_rootid.astype(np.int32), dtype=wp.int32)
            self.wp_step_overflow = wp.zeros(n, dtype=wp.int32)
            self.wp_num_overflow = wp.zeros(1, dtype=wp.int32)
            self.wp_solver_iterations = wp.zeros(1, dtype=wp.float64)
            self.wp_solver_iterations_max = wp.zeros(1, dtype=wp.int32)

        self.wp_qpos, self.wp_qvel, self.wp_ctrl = d.qpos, d.qvel, d.ctrl
        self.qpos = wp.to_torch(d.qpos)
        self.qvel = wp.to_torch(d.qvel)
        self.ctrl = wp.to_torch(d.ctrl)
        self.xpos = wp.to_torch(d.xpos)
        self.xquat = wp.to_torch(d.xquat)
        self.body_lin_vel_w = wp.to_torch(self.wp_body_lin_vel_w)
        self.body_ang_vel_w = wp.to_torch(self.wp_body_ang_vel_w)
        self.unstable = wp.to_torch(self.wp_unstable)
        self.num_unstable = wp.to_torch(self.wp_num_unstable)
        self.penalized_contacts = wp.to_torch(self.wp_penalized_contacts)
        self.self_contacts = wp.to_torch(self.wp_self_contacts)
        self.foot_contact = wp.to_torch(self.wp_foot_contact)[:, :nfeet]
        self.foot_contact_force = wp.to_torch(self.wp_foot_contact_force)[:, :nfeet]
        self.overflow = wp.to_torch(self.wp_step_overflow)
        self._num_overflow = wp.to_torch(self.wp_num_overflow)
        self._solver_iterations = wp.to_torch(self.wp_solver_iterations)
        self._solver_iterations_max = wp.to_torch(self.wp_solver_iterations_max)
        self._physics_steps = 0  # host count of physics steps since the last metrics()
        self.home_qpos_t = torch.tensor(self.home_qpos, dtype=torch.float32, device=self.device)
        self.home_ctrl_t = torch.tensor(self.home_ctrl, dtype=torch.float32, device=self.device)
        self._bind(m)

        self._graphs: dict[str, wp.Graph] = {}
        self._inline = False  # launches_inline(): a caller captures the launches into its own graph
        self.world_params: WorldParams | None = None
        self._capture_stream = wp.Stream(self.wp_device) if self.use_graph and wp.get_device(self.wp_device).is_cuda \
            else None
        with wp.ScopedDevice(self.wp_device):
            self._post_step()

    def _bind(self, m: mujoco.MjModel) -> None:
        """Typed buffers of the state and of each kernel stage, bound once (all zero-copy)."""
        d, c = self.data, self.cfg
        s = self.state = SimState()
        s.qpos, s.qvel, s.ctrl = d.qpos, d.qvel, d.ctrl
        s.xpos, s.xquat = d.xpos, warp_view(self.xquat, wp.vec4)
        s.body_lin_vel_w, s.body_ang_vel_w = self.wp_body_lin_vel_w, self.wp_body_ang_vel_w
        s.unstable, s.penalized_contacts = self.wp_unstable, self.wp_penalized_contacts
        s.self_contacts = self.wp_self_contacts

        bv = self._body_vel = BodyVelBuffers()
        bv.body_rootid, bv.xpos, bv.subtree_com, bv.cvel = self.wp_body_rootid, d.xpos, d.subtree_com, d.cvel
        bv.lin_vel_w_out, bv.ang_vel_w_out = self.wp_body_lin_vel_w, self.wp_body_ang_vel_w

        g = self._guard = GuardBuffers()
        self.root_height_adr = root_height_adr(m)
        g.qpos, g.qvel, g.root_height_adr = d.qpos, d.qvel, self.root_height_adr
        g.max_qvel, g.min_height = c.instability_max_qvel, c.instability_min_height
        g.max_height = c.instability_max_height
        g.unstable_out, g.count_out = self.wp_unstable, self.wp_num_unstable

        ct = self._contacts = ContactBuffers()
        ct.nacon, ct.geom, ct.worldid, ct.dim = d.nacon, d.contact.geom, d.contact.worldid, d.contact.dim
        ct.efc_address, ct.efc_force = d.contact.efc_address, d.efc.force
        ct.geom_foot, ct.geom_penalized = self.wp_geom_foot, self.wp_geom_penalized
        ct.elliptic = int(int(m.opt.cone) == int(mujoco.mjtCone.mjCONE_ELLIPTIC))
        ct.foot_contact_out, ct.foot_force_out = self.wp_foot_contact, self.wp_foot_contact_force
        ct.penalized_out, ct.self_out = self.wp_penalized_contacts, self.wp_self_contacts
        ct.geom_robot = self.wp_geom_robot

        n, dev = self.num_envs, self.device
        self._reset_mask = torch.zeros(n, dtype=torch.bool, device=dev)
        self._qpos_target = torch.zeros(n, m.nq, dtype=torch.float32, device=dev)
        self._qvel_target = torch.zeros(n, m.nv, dtype=torch.float32, device=dev)
        r = self._reset = ResetBuffers()
        r.mask = warp_view(self._reset_mask, wp.bool)
        r.qpos_target, r.qvel_target = warp_view(self._qpos_target), warp_view(self._qvel_target)
        r.qpos_out, r.qvel_out, r.qacc_warmstart_out = d.qpos, d.qvel, d.qacc_warmstart
        r.act_out, r.time_out = d.act, d.time

        o = self._overflow = OverflowBuffers()
        o.overflow, o.counted_bits = d.overflow, int(mjw.OverflowType.ALL) & ~QUIET_OVERFLOWS
        o.step_overflow_out, o.num_overflow_out = self.wp_step_overflow, self.wp_num_overflow

        sv = self._solver_stats = SolverStatsBuffers()
        sv.solver_niter, sv.iterations_out, sv.max_out = d.solver_niter, self.wp_solver_iterations, \
            self.wp_solver_iterations_max

    # --------------------------------------------------------------- internals
    def _derived(self) -> None:
        """Kinematics, com quantities, velocities and body velocities from the current qpos/qvel."""
        mjw.kinematics(self.model, self.data)
        mjw.com_pos(self.model, self.data)
        mjw.com_vel(self.model, self.data)
        body_velocities(self._body_vel)

    def _post_step(self) -> None:
        self._derived()
        contacts(self._contacts)
        guard(self._guard)
        collect_overflow(self._overflow)

    def _decimated_step(self) -> None:
        for _ in range(self.decimation):
            mjw.step(self.model, self.data)
            accumulate_solver_stats(self._solver_stats)
        self._post_step()

    def _reset_launches(self) -> None:
        reset(self._reset)
        self._derived()
        guard(self._guard)

    def _forward_launches(self) -> None:
        mjw.forward(self.model, self.data)
        self._post_step()

    def _run(self, name: str, launches) -> None:
        """Run ``launches`` (a function issuing Warp work) on torch's current stream: replay its graph
        ``name`` (captured on first use) when capturing, else eagerly (and always eagerly inside
        :meth:`launches_inline`, where a caller is capturing them into its own graph)."""
        with wp.ScopedDevice(self.wp_device), torch_stream_scope(self.wp_device):
            if self.use_graph and not self._inline:
                wp.capture_launch(self._graph(name, launches))
            else:
                launches()

    def _graph(self, name: str, launches) -> wp.Graph:
        graph = self._graphs.get(name)
        if graph is None:  # capturing records the launches without running them: the state is unchanged
            # CUDA: a private stream (torch's legacy default stream cannot be captured); CPU: Warp's APIC
            private = self._capture_stream is not None
            with (wp.ScopedStream(self._capture_stream, sync_enter=False) if private else contextlib.nullcontext(),
                  wp.ScopedCapture(self.wp_device) as capture):
                launches()
            graph = self._graphs[name] = capture.graph
        return graph

    # ------------------------------------------------------------------ public
    def step(self) -> None:
        """One control step: ``decimation`` physics steps, then derived quantities, contacts, guard and
        the overflow bits. When capturing, the whole decimated step is one graph (``decimation`` is fixed
        at the first call)."""
        self._run("step", self._decimated_step)
        if not self._inline:  # a caller capturing the step counts its replays (account_step)
            self._physics_steps += self.decimation

    def forward(self) -> None:
        """Full ``mj_forward`` (incl. collision and constraint forces) for all worlds, then views."""
        self._run("forward", self._forward_launches)

    def kinematics(self) -> None:
        """Recompute body poses and velocities (views) from the current qpos/qvel of all worlds."""
        self._run("kinematics", self._derived)

    def warm_up(self) -> None:
        """Compile every hot-path kernel: capture the step, reset, forward and kinematics graphs (capture
        records, it does not run, so the state is unchanged); without capture, run ``forward`` (idempotent)."""
        if not self.use_graph:
            self.forward()
            return
        with wp.ScopedDevice(self.wp_device):
            for name, launches in (("step", self._decimated_step), ("reset", self._reset_launches),
                                   ("forward", self._forward_launches), ("kinematics", self._derived)):
                self._graph(name, launches)

    def metrics(self) -> dict[str, torch.Tensor]:
        """``env/overflow``: worlds whose MJWarp buffers overflowed (contacts, constraint rows, ...), summed
        over the control steps since the last call (solver iteration caps are not counted); resets it."""
        out = {"env/overflow": self._num_overflow[0].clone()}
        self._num_overflow.zero_()
        out.update(self.solver_metrics())
        return out

    def solver_metrics(self) -> dict[str, torch.Tensor]:
        """``sim/solver_iterations``: constraint-solver iterations per world and physics step, averaged over the
        physics steps since the last call (the states the env visited); ``sim/solver_iterations_max``: the
        largest count of one world in one step (the solver loop runs until the slowest world is done, capped at
        ``opt.iterations``). Device scalars; resets them."""
        steps = max(self._physics_steps, 1) * self.num_envs
        out = {"sim/solver_iterations": (self._solver_iterations[0] / steps).float(),
               "sim/solver_iterations_max": self._solver_iterations_max[0].float()}
        self._solver_iterations.zero_()
        self._solver_iterations_max.zero_()
        self._physics_steps = 0
        return out

    def enable_world_params(self) -> WorldParams:
        """MJWarp model fields are batched along the world axis (shape ``[1, ...]`` shared, ``[N, ...]`` per
        world; MJWarp reads row ``world % W``): the fields of :class:`WorldParams` become ``[N, ...]`` copies of
        the nominal values, as mjlab's ``expand_model_fields`` does. Graphs captured before are dropped."""
        if self.world_params is None:
            p = WorldParams()
            for name, value in world_param_values(self.mj_model, self.num_envs).items():
                old = getattr(self.model, name)
                arr = wp.array(value, dtype=old.dtype, device=self.wp_device)
                arr._is_batched = True  # as mujoco_warp.put_model marks its batched fields
                setattr(self.model, name, arr)
                setattr(p, name, arr)
            self.world_params = p
            self._graphs.clear()
            self.graph_epoch += 1
        return self.world_params

    @property
    def capturable(self) -> bool:
        """CUDA: where the backend captures its own graphs (Warp's memory pool on); CPU: always (Warp records
        the launches and replays them in C++)."""
        return self.use_graph or not wp.get_device(self.wp_device).is_cuda

    @contextlib.contextmanager
    def launches_inline(self):
        self._inline = True
        try:
            yield
        finally:
            self._inline = False

    def account_step(self) -> None:
        self._physics_steps += self.decimation

    def reset_bound(self) -> None:
        """The reset reads the bound mask and targets in place (no copies)."""
        self._read_reset_inputs(*self._bound_reset)
        self._run("reset", self._reset_launches)

    def reset_worlds(self, mask: torch.Tensor, qpos_target: torch.Tensor, qvel_target: torch.Tensor) -> None:
        """Set ``qpos``/``qvel`` of the worlds where ``mask [N]`` (bool/int) is set from
        ``qpos_target [N, nq]`` / ``qvel_target [N, nv]`` (rows of other worlds are ignored); zero
        their warm start / activations / time; recompute the views and the guard. Other worlds' state
        is not written (their derived quantities are recomputed deterministically from unchanged
        inputs). The inputs are copied into preallocated buffers; no host synchronisation."""
        self._read_reset_inputs(self._reset_mask, self._qpos_target, self._qvel_target)
        self._reset_mask.copy_(mask)
        self._qpos_target.copy_(qpos_target)
        self._qvel_target.copy_(qvel_target)
        self._run("reset", self._reset_launches)

    def _read_reset_inputs(self, mask: torch.Tensor, qpos_target: torch.Tensor, qvel_target: torch.Tensor) -> None:
        """Point the reset at these input buffers (a host-side rebind, only when they change; the reset graph
        captured with the others is dropped)."""
        r = self._reset
        if r.mask.ptr != mask.data_ptr():
            r.mask, r.qpos_target, r.qvel_target = (warp_view(mask, wp.bool), warp_view(qpos_target),
                                                    warp_view(qvel_target))
            self._graphs.pop("reset", None)

    def set_penalized_geoms(self, geom_mask: np.ndarray) -> None:
        self.wp_geom_penalized.assign(np.asarray(geom_mask, dtype=np.int32).reshape(self.mj_model.ngeom))

    def state_dict(self) -> dict:
        """``qpos``, ``qvel``, ``ctrl``, ``qacc_warmstart`` (float32 copies)."""
        return {"qpos": self.qpos.clone(), "qvel": self.qvel.clone(), "ctrl": self.ctrl.clone(),
                "qacc_warmstart": wp.to_torch(self.data.qacc_warmstart).clone()}

    def load_state_dict(self, state: dict) -> None:
        self.qpos.copy_(state["qpos"])
        self.qvel.copy_(state["qvel"])
        self.ctrl.copy_(state["ctrl"])
        wp.to_torch(self.data.qacc_warmstart).copy_(state["qacc_warmstart"])
        with wp.ScopedDevice(self.wp_device), torch_stream_scope(self.wp_device):
            self._derived()
            guard(self._guard)
