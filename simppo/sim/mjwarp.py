"""MuJoCo Warp simulation backend: ``num_envs`` worlds of one robot, zero-copy torch views."""

from __future__ import annotations

import mujoco
import mujoco_warp as mjw
import numpy as np
import torch
import warp as wp

from simppo.kernels.sim_body_vel import launch_body_vel_w
from simppo.kernels.sim_contact import launch_foot_contact
from simppo.kernels.sim_guard import launch_sim_guard
from simppo.kernels.sim_reset import launch_sim_reset
from simppo.robot.config import RobotCfg, load_robot_cfg
from simppo.robot.model import RobotModel, build_robot_model, load_mj_model
from simppo.sim.config import MJWarpSimCfg
from simppo.utils.device import init_warp, resolve_device, warp_device


class MJWarpSim:
    """Batched MuJoCo Warp simulation of ``num_envs`` copies of a robot.

    Torch views (zero-copy, on ``device``; body axes index MuJoCo body ids, 0 = world body):

    * ``qpos [N, nq]``, ``qvel [N, nv]``, ``ctrl [N, nu]`` (write targets into ``ctrl`` in place)
    * ``xpos [N, nbody, 3]``, ``xquat [N, nbody, 4]`` (wxyz) — world frame
    * ``body_lin_vel_w [N, nbody, 3]``, ``body_ang_vel_w [N, nbody, 3]`` — world-frame velocity of
      each body frame origin
    * ``foot_contact [N, nfeet]`` int32 (1 = foot touches something), ``foot_contact_force
      [N, nfeet]`` (normal force, N) in ``robot_cfg.feet`` order
    * ``unstable [N]`` int32 (1 = non-finite / out-of-bounds state after the last step or reset),
      ``num_unstable [1]`` int32

    All views are consistent with the final ``qpos``/``qvel`` after ``step()`` and
    ``reset_worlds()`` (kinematics and velocities are recomputed). Contact flags describe the
    contacts found during the last physics substep.
    """

    def __init__(
        self,
        robot_cfg: RobotCfg | str,
        sim_cfg: MJWarpSimCfg | None = None,
        num_envs: int = 1,
        device: str = "auto",
        mj_model: mujoco.MjModel | None = None,
    ):
        init_warp()
        self.robot_cfg = load_robot_cfg(robot_cfg)
        self.cfg = sim_cfg if sim_cfg is not None else MJWarpSimCfg()
        self.num_envs = int(num_envs)
        self.device = resolve_device(device)
        self.wp_device = warp_device(self.device)
        self.decimation = int(self.cfg.decimation)

        m = mj_model if mj_model is not None else load_mj_model(self.robot_cfg)
        if self.cfg.timestep is not None:
            m.opt.timestep = float(self.cfg.timestep)
        if self.cfg.solver_iterations is not None:
            m.opt.iterations = int(self.cfg.solver_iterations)
        if self.cfg.solver_ls_iterations is not None:
            m.opt.ls_iterations = int(self.cfg.solver_ls_iterations)
        self.mj_model = m
        self.robot: RobotModel = build_robot_model(self.robot_cfg, m)
        self.physics_dt = float(m.opt.timestep)
        self.control_dt = self.physics_dt * self.decimation

        mjd = mujoco.MjData(m)
        home = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, "home")
        if home >= 0:
            mujoco.mj_resetDataKeyframe(m, mjd, home)
        mujoco.mj_forward(m, mjd)
        self.home_qpos = np.array(mjd.qpos, dtype=np.float64)
        self.home_ctrl = np.array(mjd.ctrl, dtype=np.float64)

        free = int(m.jnt_type[0]) == int(mujoco.mjtJoint.mjJNT_FREE) if m.njnt > 0 else False
        self.root_height_adr = int(m.jnt_qposadr[0]) + 2 if free else -1

        with wp.ScopedDevice(self.wp_device):
            self.model = mjw.put_model(m)
            # Hitting the solver/line-search iteration caps is normal for falling robots (MuJoCo C is
            # silent about it too); keep MJWarp's warnings for real buffer overflows only.
            quiet = mjw.OverflowType.ITERATIONS | mjw.OverflowType.LS_ITERATIONS
            self.model.opt.warn_overflow = int(self.model.opt.warn_overflow) & ~int(quiet)
            self.data = mjw.put_data(
                m, mjd, nworld=self.num_envs, nconmax=self.cfg.nconmax, njmax=self.cfg.njmax
            )
            n, nb = self.num_envs, m.nbody
            self.wp_body_lin_vel_w = wp.zeros((n, nb), dtype=wp.vec3)
            self.wp_body_ang_vel_w = wp.zeros((n, nb), dtype=wp.vec3)
            self.wp_unstable = wp.zeros(n, dtype=wp.int32)
            self.wp_num_unstable = wp.zeros(1, dtype=wp.int32)
            nfeet = len(self.robot_cfg.feet)
            self.wp_foot_contact = wp.zeros((n, max(nfeet, 1)), dtype=wp.int32)
            self.wp_foot_contact_force = wp.zeros((n, max(nfeet, 1)), dtype=wp.float32)
            geom_foot = np.full(m.ngeom, -1, dtype=np.int32)
            collides = (m.geom_contype != 0) | (m.geom_conaffinity != 0)
            for k, bid in enumerate(self.robot.feet_body_ids):
                geom_foot[(m.geom_bodyid == bid) & collides] = k
            self.wp_geom_foot = wp.array(geom_foot, dtype=wp.int32)
            self.wp_body_rootid = wp.array(m.body_rootid.astype(np.int32), dtype=wp.int32)

        d = self.data
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
        self.foot_contact = wp.to_torch(self.wp_foot_contact)[:, :nfeet]
        self.foot_contact_force = wp.to_torch(self.wp_foot_contact_force)[:, :nfeet]

        self.home_qpos_t = torch.tensor(self.home_qpos, dtype=torch.float32, device=self.device)
        self.home_ctrl_t = torch.tensor(self.home_ctrl, dtype=torch.float32, device=self.device)

        self._graph = None
        self.use_graph = bool(self.cfg.use_cuda_graph) and wp.get_device(self.wp_device).is_cuda
        with wp.ScopedDevice(self.wp_device):
            self._post_step()

    # ------------------------------------------------------------------ sizes
    @property
    def nq(self) -> int:
        return self.mj_model.nq

    @property
    def nv(self) -> int:
        return self.mj_model.nv

    @property
    def nu(self) -> int:
        return self.mj_model.nu

    @property
    def nbody(self) -> int:
        return self.mj_model.nbody

    # --------------------------------------------------------------- internals
    def _derived(self) -> None:
        """Kinematics, com quantities, velocities and body velocities from the current qpos/qvel."""
        mjw.kinematics(self.model, self.data)
        mjw.com_pos(self.model, self.data)
        mjw.com_vel(self.model, self.data)
        d = self.data
        launch_body_vel_w(
            self.wp_body_rootid, d.xpos, d.subtree_com, d.cvel, self.wp_body_lin_vel_w, self.wp_body_ang_vel_w
        )

    def _guard(self) -> None:
        c = self.cfg
        launch_sim_guard(
            self.data.qpos,
            self.data.qvel,
            self.root_height_adr,
            c.instability_max_qvel,
            c.instability_min_height,
            c.instability_max_height,
            self.wp_unstable,
            self.wp_num_unstable,
        )

    def _contacts(self) -> None:
        if not self.cfg.foot_contact:
            return
        d = self.data
        launch_foot_contact(
            d.nacon,
            d.contact.geom,
            d.contact.worldid,
            d.contact.dim,
            d.contact.efc_address,
            d.efc.force,
            self.wp_geom_foot,
            int(self.mj_model.opt.cone) == int(mujoco.mjtCone.mjCONE_ELLIPTIC),
            self.wp_foot_contact,
            self.wp_foot_contact_force,
        )

    def _post_step(self) -> None:
        self._derived()
        self._contacts()
        self._guard()

    def _decimated_step(self) -> None:
        for _ in range(self.decimation):
            mjw.step(self.model, self.data)
        self._post_step()

    # ------------------------------------------------------------------ public
    def step(self) -> None:
        """One control step: ``decimation`` physics steps, then derived quantities and the guard.

        On CUDA (``use_cuda_graph``) the whole decimated step is captured once and replayed (so
        ``decimation`` is fixed at the first call); on CPU the same launches run eagerly."""
        with wp.ScopedDevice(self.wp_device):
            if self.use_graph:
                if self._graph is None:
                    with wp.ScopedCapture() as capture:
                        self._decimated_step()
                    self._graph = capture.graph
                wp.capture_launch(self._graph)
            else:
                self._decimated_step()

    def forward(self) -> None:
        """Full ``mj_forward`` (incl. collision and constraint forces) for all worlds, then views."""
        with wp.ScopedDevice(self.wp_device):
            mjw.forward(self.model, self.data)
            self._post_step()

    def kinematics(self) -> None:
        """Recompute body poses and velocities (views) from the current qpos/qvel of all worlds."""
        with wp.ScopedDevice(self.wp_device):
            self._derived()

    def reset_worlds(self, mask: torch.Tensor, qpos_target: torch.Tensor, qvel_target: torch.Tensor) -> None:
        """Set ``qpos``/``qvel`` of the worlds where ``mask [N]`` (bool/int) is set from
        ``qpos_target [N, nq]`` / ``qvel_target [N, nv]`` (rows of other worlds are ignored); zero
        their warm start / activations / time; recompute the views. Other worlds' state is not
        written (their derived quantities are recomputed deterministically from unchanged inputs).
        No host synchronisation."""
        mask = mask.to(device=self.device, dtype=torch.int32).contiguous()
        qpos_target = qpos_target.to(device=self.device, dtype=torch.float32).contiguous()
        qvel_target = qvel_target.to(device=self.device, dtype=torch.float32).contiguous()
        d = self.data
        with wp.ScopedDevice(self.wp_device):
            launch_sim_reset(
                wp.from_torch(mask, dtype=wp.int32),
                wp.from_torch(qpos_target),
                wp.from_torch(qvel_target),
                d.qpos,
                d.qvel,
                d.qacc_warmstart,
                d.act,
                d.time,
            )
            self._derived()
            self._guard()

    def reset_all_home(self) -> None:
        """Every world to the home keyframe (zero velocity, ctrl = home ctrl)."""
        n = self.num_envs
        mask = torch.ones(n, dtype=torch.int32, device=self.device)
        qpos = self.home_qpos_t.expand(n, -1)
        qvel = torch.zeros(n, self.nv, dtype=torch.float32, device=self.device)
        self.ctrl.copy_(self.home_ctrl_t.expand(n, -1))
        self.reset_worlds(mask, qpos, qvel)
