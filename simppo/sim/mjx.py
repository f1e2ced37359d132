"""MuJoCo XLA (MJX) simulation backend: ``num_envs`` worlds stepped by one ``jax.jit`` of a ``jax.vmap``.

``sim=mjx`` (optional extra ``[mjx]``: ``mujoco-mjx`` and ``jax``). The same MJCF, PD servos, options and home
state as the other backends (:func:`~simppo.sim.common.configure_model`); the state of every world lives in one
batched MJX ``Data`` of JAX arrays on the device. One control step is one compiled call: ``decimation`` MJX steps
(a ``fori_loop``), then kinematics and com quantities of the final state (so that, as in the other backends, the
poses describe the state the env reads), and the contacts of the last substep in MJWarp's flat layout.

Zero-copy both ways, through DLPack:
- JAX → torch / Warp: ``qpos``, ``qvel``, ``xpos``, ``xquat``, ``cvel``, ``subtree_com`` and the contact arrays are
  views of the JAX arrays that the last call returned (``torch.from_dlpack``, ``wp.from_dlpack``; same data
  pointer). A JAX call returns new arrays, so the views (the torch attributes and the fields of ``state``, the
  :class:`SimState` struct the env passes to its kernels at every launch) are re-bound after every call, on the
  host, without copying data. Writes through the ``qpos`` / ``qvel`` views (the env's pushes) land in the arrays
  the next call reads.
- torch → JAX: ``ctrl`` and the per-world model parameters are torch buffers allocated once, handed to every call
  as JAX arrays over the same memory (``jax.dlpack.from_dlpack``).
:meth:`aliasing` reports the data pointers of both sides (tests check them).

Which MJX implementation runs is ``SimCfg.mjx_impl``: ``jax`` (MJX's own JAX physics, the default; every device
JAX has) or ``warp`` (the MuJoCo Warp kernels behind MJX's API; CUDA only, and ``mujoco-mjx[warp]``'s pinned
``warp-lang``). Differences from the other backends: float32 physics (as MJWarp); every world is stepped, also one
the guard flagged (as MJWarp; the env resets those); MJX does not report overflows.
"""

from __future__ import annotations

import functools
from pathlib import Path

import mujoco
import numpy as np
import torch
import warp as wp

from simppo.kernels.sim.body_vel import BodyVelBuffers, body_velocities
from simppo.kernels.sim.contact import ContactBuffers, contacts
from simppo.kernels.sim.guard import GuardBuffers, guard
from simppo.robot.config import RobotCfg, load_robot_cfg
from simppo.sim.base import SimBackend, SimState, WorldParams, world_param_values
from simppo.sim.common import configure_model, geom_foot_map, home_state, robot_collision_geoms, root_height_adr
from simppo.sim.config import MJX_IMPLS, SimCfg
from simppo.utils.device import init_warp, resolve_device, warp_device, warp_view


def import_mjx():
    """``(jax, mujoco.mjx)``, or an ImportError (one line) naming the extra. Compiled calls are cached on disk
    (``~/.cache/simppo/jax``, as Warp caches its kernels) unless JAX already has a cache folder."""
    try:
        import jax
        from mujoco import mjx
    except ImportError as exc:
        raise ImportError(f"sim=mjx needs mujoco-mjx and jax, which are not installed ({exc}): "
                          "pip install -e '.[mjx]'") from None
    if not jax.config.jax_compilation_cache_dir:
        jax.config.update("jax_compilation_cache_dir", str(Path.home() / ".cache" / "simppo" / "jax"))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
    return jax, mjx


def check_supported(m: mujoco.MjModel, cfg: SimCfg, device: str) -> None:
    """One-line errors for what MJX (or its chosen implementation) cannot simulate as the other backends do."""
    if cfg.mjx_impl not in MJX_IMPLS:
        raise ValueError(f"sim.mjx_impl: unknown implementation {cfg.mjx_impl!r}; choose one of {list(MJX_IMPLS)}")
    if cfg.mjx_impl == "warp" and torch.device(device).type != "cuda":
        raise ValueError("sim.mjx_impl=warp: MJX's Warp implementation runs on CUDA devices only; use "
                         "sim.mjx_impl=jax on the CPU")
    if int(m.opt.integrator) not in (int(mujoco.mjtIntegrator.mjINT_EULER),
                                     int(mujoco.mjtIntegrator.mjINT_IMPLICITFAST)):
        raise ValueError(f"sim=mjx: integrator {mujoco.mjtIntegrator(m.opt.integrator).name} is not supported by "
                         "MJX here (Euler or implicitfast)")


@functools.lru_cache(maxsize=8)
def compiled_calls(num_envs: int, decimation: int) -> dict:
    """The jitted batched calls ``fn(model, params, data, ctrl, *extra)`` (``vmap`` over worlds; ``params``: the
    per-world model fields, ``{}`` when there are none), shared by every backend of this shape in the process: the
    model is an argument, so models with the same sizes share one compilation (and the disk cache's entry)."""
    jax, mjx = import_mjx()
    jnp = jax.numpy

    def with_params(model, params: dict):
        return model.replace(**params) if params else model

    def derived(m_w, d_w):
        return mjx.com_vel(m_w, mjx.com_pos(m_w, mjx.kinematics(m_w, d_w)))

    def control_step(model, params, d_w, ctrl_w):
        m_w = with_params(model, params)
        d_w = jax.lax.fori_loop(0, decimation, lambda _, x: mjx.step(m_w, x), d_w.replace(ctrl=ctrl_w))
        return derived(m_w, d_w)

    def forward(model, params, d_w, ctrl_w):
        return mjx.forward(with_params(model, params), d_w.replace(ctrl=ctrl_w))

    def kinematics(model, params, d_w, ctrl_w):
        return derived(with_params(model, params), d_w.replace(ctrl=ctrl_w))

    def reset(model, params, d_w, ctrl_w, mask, qpos, qvel):
        def pick(new, old):
            return jnp.where(mask, new.astype(old.dtype), old)

        def zero(old):
            return pick(jnp.zeros_like(old), old)

        old_qpos = d_w.qpos
        d_w = d_w.replace(qpos=pick(qpos, d_w.qpos), qvel=pick(qvel, d_w.qvel), ctrl=ctrl_w,
                          qacc_warmstart=zero(d_w.qacc_warmstart), act=zero(d_w.act), time=zero(d_w.time))
        d_w = derived(with_params(model, params), d_w)
        # MJX's kinematics writes normalised quaternions back into qpos: the worlds that are not reset keep theirs
        return d_w.replace(qpos=pick(d_w.qpos, old_qpos))

    def batched(fn, extra: int = 0, with_contacts: bool = False):
        """One compiled call: ``fn`` over every world, and (``with_contacts``) the contact layout of the result."""
        over_worlds = jax.vmap(fn, in_axes=(None, 0, 0, 0) + (0,) * extra)

        def call(*args):
            d = over_worlds(*args)
            return d, (contact_layout(d) if with_contacts else None)

        return jax.jit(call)

    return {"tile": jax.jit(lambda d: jax.tree_util.tree_map(lambda x: jnp.repeat(x[None], num_envs, axis=0), d)),
            "step": batched(control_step, with_contacts=True), "forward": batched(forward, with_contacts=True),
            "kinematics": batched(kinematics), "reset": batched(reset, 3)}


def contact_layout(d) -> dict:
    """The contacts of the last substep of batched ``d`` in MJWarp's flat layout: ``geom [N*C, 2]``,
    ``dim [N*C]``, ``efc_address [N*C, 1]`` (-1: not active, i.e. ``dist >= includemargin``, as MuJoCo C's contact
    list), ``efc_force [N, nefc]``."""
    jnp = import_mjx()[0].numpy
    if not hasattr(d._impl, "contact"):  # no contact can occur in this model
        return None
    con = d._impl.contact
    active = (con.dist < con.includemargin) & (con.efc_address >= 0)
    address = jnp.where(active, con.efc_address, -1).astype(jnp.int32)
    return {"geom": con.geom.astype(jnp.int32).reshape(-1, 2), "dim": con.dim.astype(jnp.int32).reshape(-1),
            "efc_address": address.reshape(-1, 1), "efc_force": d._impl.efc_force.astype(jnp.float32)}


class MJXSim(SimBackend):
    """Batched MJX simulation of ``num_envs`` copies of a robot (see the module and :class:`SimBackend`).

    Extra attributes: ``jax_device``, ``mjx_model``, ``data`` (the batched MJX ``Data`` of the last call),
    ``cvel [N, nbody, 6]`` and ``subtree_com [N, nbody, 3]`` views.
    """

    def __init__(
        self,
        robot_cfg: RobotCfg | str,
        sim_cfg: SimCfg | None = None,
        num_envs: int = 1,
        device: str = "cpu",
        mj_model: mujoco.MjModel | None = None,
    ):
        jax, mjx = import_mjx()
        init_warp()
        self.robot_cfg = load_robot_cfg(robot_cfg)
        self.cfg = c = sim_cfg if sim_cfg is not None else SimCfg()
        self.num_envs = n = int(num_envs)
        self.device = resolve_device(device)
        self.wp_device = warp_device(self.device)
        tdev = torch.device(self.device)
        platform = "gpu" if tdev.type == "cuda" else "cpu"
        try:
            self.jax_device = jax.devices(platform)[tdev.index or 0]
        except RuntimeError:
            raise ValueError(f"sim=mjx on {self.device}: JAX has no {platform} device here (a CUDA build of jaxlib "
                             "is needed on GPUs)") from None
        self.decimation = int(c.decimation)
        self.mj_model, self.robot = m, robot = configure_model(self.robot_cfg, c, mj_model)
        check_supported(m, c, self.device)
        self.physics_dt = float(m.opt.timestep)
        self.control_dt = self.physics_dt * self.decimation
        mjd, self.home_qpos, self.home_ctrl = home_state(m)
        self._jax, self._mjx = jax, mjx
        try:
            self.mjx_model = mjx.put_model(m, device=self.jax_device, impl=c.mjx_impl)
            one = mjx.put_data(m, mjd, device=self.jax_device, impl=c.mjx_impl)
        except (NotImplementedError, ValueError) as exc:  # e.g. a collision pair or solver setting MJX lacks
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ValueError(f"sim=mjx ({c.mjx_impl}) cannot simulate {self.robot_cfg.name}: {first}") from None
        nfeet = len(self.robot_cfg.feet)
        self.ncon = int(one._impl.contact.dist.shape[0]) if hasattr(one._impl, "contact") else 0

        # --- torch-owned buffers: inputs handed to JAX (ctrl, world parameters) and the kernels' outputs
        def buf(*shape, dtype=torch.float32):
            return torch.zeros(*shape, dtype=dtype, device=self.device)

        self.ctrl = buf(n, m.nu)
        self.ctrl.copy_(torch.as_tensor(self.home_ctrl, dtype=torch.float32).expand(n, -1))
        self.body_lin_vel_w, self.body_ang_vel_w = buf(n, m.nbody, 3), buf(n, m.nbody, 3)
        self.unstable, self.num_unstable = buf(n, dtype=torch.int32), buf(1, dtype=torch.int32)
        self.penalized_contacts, self.self_contacts = buf(n), buf(n)
        self._foot_contact, self._foot_force = buf(n, max(nfeet, 1), dtype=torch.int32), buf(n, max(nfeet, 1))
        self.foot_contact, self.foot_contact_force = self._foot_contact[:, :nfeet], self._foot_force[:, :nfeet]
        self.home_qpos_t = torch.tensor(self.home_qpos, dtype=torch.float32, device=self.device)
        self.home_ctrl_t = torch.tensor(self.home_ctrl, dtype=torch.float32, device=self.device)
        self._reset_mask = buf(n, dtype=torch.bool)
        self._qpos_target, self._qvel_target = buf(n, m.nq), buf(n, m.nv)
        self.world_params: WorldParams | None = None
        self._param_tensors: dict[str, torch.Tensor] = {}
        self._bind_static(m, robot)

        self._build_calls()
        self.data = self._calls["tile"](one)
        self._call("kinematics")  # poses now; contact summaries from the first step or forward() on

    # --------------------------------------------------------------- compiled calls
    def _build_calls(self) -> None:
        self._calls = compiled_calls(self.num_envs, self.decimation)

    def _jax_view(self, t: torch.Tensor):
        """A JAX array over the memory of torch tensor ``t`` (no copy)."""
        return self._jax.dlpack.from_dlpack(t)

    def _params(self) -> dict:
        return {k: self._jax_view(t) for k, t in self._param_tensors.items()}

    def _call(self, name: str, *extra) -> None:
        """Run compiled call ``name`` on the current data, keep its result and re-bind the views."""
        args = (self.mjx_model, self._params(), self.data, self._jax_view(self.ctrl), *extra)
        self.data, layout = self._calls[name](*args)
        self._publish(layout)

    # --------------------------------------------------------------- views
    def _bind_static(self, m: mujoco.MjModel, robot) -> None:
        """The Warp structs over the torch-owned buffers (bound once); the JAX views are bound by _publish."""
        c, n = self.cfg, self.num_envs
        with wp.ScopedDevice(self.wp_device):
            s = self.state = SimState()
            s.ctrl = warp_view(self.ctrl)
            s.body_lin_vel_w = warp_view(self.body_lin_vel_w, wp.vec3)
            s.body_ang_vel_w = warp_view(self.body_ang_vel_w, wp.vec3)
            s.unstable, s.penalized_contacts = warp_view(self.unstable), warp_view(self.penalized_contacts)
            s.self_contacts = warp_view(self.self_contacts)
            bv = self._body_vel = BodyVelBuffers()
            bv.body_rootid = wp.array(m.body_rootid.astype(np.int32), dtype=wp.int32)
            bv.lin_vel_w_out, bv.ang_vel_w_out = s.body_lin_vel_w, s.body_ang_vel_w
            g = self._guard = GuardBuffers()
            g.root_height_adr = root_height_adr(m)
            g.max_qvel, g.min_height = c.instability_max_qvel, c.instability_min_height
            g.max_height = c.instability_max_height
            g.unstable_out, g.count_out = s.unstable, warp_view(self.num_unstable)
            ct = self._contacts = ContactBuffers()
            ct.nacon = wp.array([n * self.ncon], dtype=wp.int32)
            ct.worldid = wp.array(np.repeat(np.arange(n, dtype=np.int32), self.ncon), dtype=wp.int32)
            ct.geom_foot = wp.array(geom_foot_map(m, robot, c.foot_contact), dtype=wp.int32)
            ct.geom_penalized = self.wp_geom_penalized = wp.zeros(m.ngeom, dtype=wp.int32)
            ct.geom_robot = wp.array(robot_collision_geoms(m).astype(np.int32), dtype=wp.int32)
            ct.elliptic = int(int(m.opt.cone) == int(mujoco.mjtCone.mjCONE_ELLIPTIC))
            ct.foot_contact_out, ct.foot_force_out = warp_view(self._foot_contact), warp_view(self._foot_force)
            ct.penalized_out, ct.self_out = s.penalized_contacts, s.self_contacts
        self._contact_views: dict = {}

    def _publish(self, layout: dict | None) -> None:
        """Views of the current JAX arrays (torch and Warp, no copies), then the derived kernels (the contact
        summaries when the call gave the contacts' ``layout``)."""
        d = self.data
        self._jax.block_until_ready((d, layout))  # the kernels below read what the call wrote
        as_torch = torch.from_dlpack
        self.qpos, self.qvel = as_torch(d.qpos), as_torch(d.qvel)
        self.xpos, self.xquat = as_torch(d.xpos), as_torch(d.xquat)
        self.cvel, self.subtree_com = as_torch(d.cvel), as_torch(d.subtree_com)
        s, bv, g = self.state, self._body_vel, self._guard
        with wp.ScopedDevice(self.wp_device):
            s.qpos, s.qvel = warp_view(self.qpos), warp_view(self.qvel)
            s.xpos, s.xquat = warp_view(self.xpos, wp.vec3), warp_view(self.xquat, wp.vec4)
            bv.xpos, bv.subtree_com = s.xpos, warp_view(self.subtree_com, wp.vec3)
            bv.cvel = warp_view(self.cvel, wp.spatial_vector)
            g.qpos, g.qvel = s.qpos, s.qvel
            body_velocities(bv)
            if layout is not None:
                self._contact_views = {k: as_torch(v) for k, v in layout.items()}
                cv, ct = self._contact_views, self._contacts
                ct.geom, ct.dim = warp_view(cv["geom"], wp.vec2i), warp_view(cv["dim"])
                ct.efc_address, ct.efc_force = warp_view(cv["efc_address"]), warp_view(cv["efc_force"])
                contacts(ct)
            guard(g)

    def aliasing(self) -> dict[str, tuple[int, int]]:
        """``{name: (pointer seen by JAX, pointer of the torch view)}`` of every shared array (equal pairs: no
        copy between the simulator and torch / Warp)."""
        d = self.data
        out = {name: (getattr(d, name).unsafe_buffer_pointer(), getattr(self, name).data_ptr())
               for name in ("qpos", "qvel", "xpos", "xquat", "cvel", "subtree_com")}
        out["ctrl"] = (self._jax_view(self.ctrl).unsafe_buffer_pointer(), self.ctrl.data_ptr())
        out["state.qpos"] = (d.qpos.unsafe_buffer_pointer(), self.state.qpos.ptr)
        for k, t in self._param_tensors.items():
            out[k] = (self._jax_view(t).unsafe_buffer_pointer(), t.data_ptr())
        return out

    # ------------------------------------------------------------------ public
    def step(self) -> None:
        """One control step: ``decimation`` MJX steps with the targets in ``ctrl``, then the views."""
        self._call("step")

    def forward(self) -> None:
        """``mjx.forward`` of every world (poses, contacts, constraint forces), then the views."""
        self._call("forward")

    def kinematics(self) -> None:
        """Body poses and velocities of every world from the current ``qpos`` / ``qvel``."""
        self._call("kinematics")

    def reset_worlds(self, mask: torch.Tensor, qpos_target: torch.Tensor, qvel_target: torch.Tensor) -> None:
        """Worlds where ``mask [N]`` is set get ``qpos_target`` / ``qvel_target`` and zero warm start, act and
        time; then the views. The inputs are copied into preallocated buffers handed to JAX without copies."""
        self._reset_mask.copy_(mask)
        self._qpos_target.copy_(qpos_target)
        self._qvel_target.copy_(qvel_target)
        self._call("reset", self._jax_view(self._reset_mask), self._jax_view(self._qpos_target),
                   self._jax_view(self._qvel_target))

    def set_penalized_geoms(self, geom_mask: np.ndarray) -> None:
        self.wp_geom_penalized.assign(np.asarray(geom_mask, dtype=np.int32).reshape(self.mj_model.ngeom))

    def enable_world_params(self) -> WorldParams:
        """The fields of :class:`WorldParams` become torch buffers ``[N, ...]`` (nominal values), handed to every
        call as the batched MJX model fields (``vmap`` over worlds); their Warp views are returned."""
        if self.world_params is None:
            p = WorldParams()
            dtypes = dict(WorldParams.vars)
            for name, value in world_param_values(self.mj_model, self.num_envs).items():
                # a fresh torch allocation (aligned as XLA needs it: JAX then reads it without a copy)
                t = self._param_tensors[name] = torch.empty(value.shape, device=self.device)
                t.copy_(torch.from_numpy(value))
                dtype = dtypes[name].type.dtype
                with wp.ScopedDevice(self.wp_device):
                    setattr(p, name, warp_view(t, None if dtype == wp.float32 else dtype))
            self.world_params = p
        return self.world_params

    def warm_up(self) -> None:
        """Compile the step, reset, forward and kinematics calls (on copies: the state is unchanged)."""
        data, ctrl = self.data, self.ctrl.clone()
        self.step()
        self.forward()
        self.reset_worlds(torch.zeros_like(self._reset_mask), self._qpos_target, self._qvel_target)
        self.data = data
        self.ctrl.copy_(ctrl)
        self.kinematics()

    def state_dict(self) -> dict:
        """``qpos``, ``qvel``, ``ctrl``, ``qacc_warmstart`` (float32 copies)."""
        return {"qpos": self.qpos.clone(), "qvel": self.qvel.clone(), "ctrl": self.ctrl.clone(),
                "qacc_warmstart": torch.from_dlpack(self.data.qacc_warmstart).clone()}

    def load_state_dict(self, state: dict) -> None:
        self.qpos.copy_(state["qpos"])
        self.qvel.copy_(state["qvel"])
        self.ctrl.copy_(state["ctrl"])
        torch.from_dlpack(self.data.qacc_warmstart).copy_(state["qacc_warmstart"])
        self.kinematics()
