"""Per-world model parameters (``SimBackend.enable_world_params``) mean the same on both backends: each
world steps as a plain MuJoCo C model with that world's values written into it would.

Five standing G1 worlds from the home keyframe with the home ctrl plus a little noise: world 0 nominal,
world 1 with a shifted torso centre of mass, world 2 with halved hip/knee PD gains, world 3 with heavier
links (subtree masses kept consistent), world 4 with slippery feet (each edit on its own: slipping heavier
links amplify float32 rounding beyond the tolerance). 10 control steps on each backend, compared with
MuJoCo C (float64) stepping a copy of the model that holds the world's values. Tolerances: MuJoCo C
backend 1e-5 (float32 views of the same float64 physics); MJWarp (float32) the standing tolerances of
``test_sim_parity.py`` (qpos 1e-4, qvel 2e-3).
"""

import copy

import mujoco
import numpy as np
import pytest
import torch
import warp as wp

from simppo.robot import load_mj_model
from simppo.sim import MJWarpSim, MuJoCoSim, SimCfg
from simppo.sim.base import WORLD_PARAM_FIELDS, world_param_values

N, STEPS = 5, 10
TOL = {"mujoco": {"qpos": 1e-5, "qvel": 1e-5}, "mjwarp": {"qpos": 1e-4, "qvel": 2e-3}}


def _edit(values: dict[str, np.ndarray], m: mujoco.MjModel) -> None:
    """Worlds 1-4 of ``values`` (float32 ``[N, ...]`` per field) get their parameters (see the module)."""
    torso = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "torso_link")
    values["body_ipos"][1, torso] += np.array([0.03, -0.05, 0.05], dtype=np.float32)
    legs = [i for i in range(m.nu) if any(k in m.actuator(i).name for k in ("hip", "knee"))]
    values["actuator_gainprm"][2, legs, 0] *= 0.5
    values["actuator_biasprm"][2, legs, 1] *= 0.5
    values["actuator_biasprm"][2, legs, 2] *= 0.5
    scale = np.linspace(1.1, 1.4, m.nbody, dtype=np.float32)
    scale[0] = 1.0
    values["body_mass"][3] *= scale
    values["body_inertia"][3] *= scale[:, None]
    sub = values["body_mass"][3].copy()
    for b in range(m.nbody - 1, 0, -1):
        sub[m.body_parentid[b]] += sub[b]
    values["body_subtreemass"][3] = sub
    feet = [g for g in range(m.ngeom) if "foot" in (m.geom(g).name or "")]
    values["geom_friction"][4, feet, 0] = 0.05


def _reference(m: mujoco.MjModel, params: dict[str, np.ndarray], qpos, qvel, ctrl, decimation: int):
    """MuJoCo C with the world's parameters written into a model copy: qpos / qvel after ``STEPS``."""
    mm = copy.deepcopy(m)
    for name, value in params.items():
        getattr(mm, name)[:] = value
    d = mujoco.MjData(mm)
    d.qpos[:], d.qvel[:], d.ctrl[:] = qpos, qvel, ctrl
    for _ in range(STEPS * decimation):
        mujoco.mj_step(mm, d)
    return d.qpos.copy(), d.qvel.copy()


@pytest.mark.parametrize("backend", ["mujoco", "mjwarp"])
def test_each_world_steps_with_its_own_parameters(backend):
    cls = MuJoCoSim if backend == "mujoco" else MJWarpSim
    sim = cls("g1", SimCfg(name=backend, threads=2), num_envs=N, device="cpu")
    world = sim.enable_world_params()
    assert sim.enable_world_params() is world  # idempotent
    views = {name: wp.to_torch(getattr(world, name)) for name in WORLD_PARAM_FIELDS}
    nominal = {name: np.asarray(getattr(sim.mj_model, name), dtype=np.float32) for name in WORLD_PARAM_FIELDS}
    for name, v in views.items():  # every world starts at the nominal values, [N, ...] on the sim's device
        assert v.shape[0] == N and str(v.device) == sim.device
        np.testing.assert_array_equal(v.numpy(), np.broadcast_to(nominal[name], v.shape))
    values = {name: v.numpy().copy() for name, v in views.items()}
    _edit(values, sim.mj_model)
    for name, v in views.items():
        v.copy_(torch.from_numpy(values[name]))
    if backend == "mjwarp":  # the model's own batched arrays are the views
        assert sim.model.geom_friction.ptr == world.geom_friction.ptr

    sim.reset_all_home()
    g = torch.Generator().manual_seed(0)
    sim.ctrl.add_(0.05 * torch.randn(N, sim.nu, generator=g))
    qpos0, qvel0, ctrl = (t.double().numpy().copy() for t in (sim.qpos, sim.qvel, sim.ctrl))
    for _ in range(STEPS):
        sim.step()
    got_qpos, got_qvel = sim.qpos.double().numpy(), sim.qvel.double().numpy()
    ref = [_reference(sim.mj_model, {k: v[w] for k, v in values.items()}, qpos0[w], qvel0[w], ctrl[w],
                      sim.decimation) for w in range(N)]
    tol = TOL[backend]
    for w in range(N):
        np.testing.assert_allclose(got_qpos[w], ref[w][0], atol=tol["qpos"], rtol=0, err_msg=f"world {w} qpos")
        np.testing.assert_allclose(got_qvel[w], ref[w][1], atol=tol["qvel"], rtol=0, err_msg=f"world {w} qvel")
    for w in (1, 2, 3, 4):  # and the edits matter: far from what the nominal model does from the same start
        same_start = _reference(sim.mj_model, {}, qpos0[w], qvel0[w], ctrl[w], sim.decimation)
        assert np.abs(ref[w][1] - same_start[1]).max() > 20 * tol["qvel"], w
    sim.close()


@pytest.mark.parametrize("num_worlds", [1, 3])
def test_world_param_buffers_are_writable_copies(num_worlds):
    """One world too (a viewer under randomization): the buffers the randomizer writes are the worlds' own."""
    m = load_mj_model("g1")
    before = {name: np.array(getattr(m, name)) for name in WORLD_PARAM_FIELDS}
    for name, v in world_param_values(m, num_worlds).items():
        assert v.shape[0] == num_worlds and v.flags.writeable and v.flags.c_contiguous, name
        v[...] = -1.0
    for name in WORLD_PARAM_FIELDS:  # the model keeps its values
        np.testing.assert_array_equal(getattr(m, name), before[name])
