"""sim=mjx (MJX's JAX physics, float32) against the SimBackend contract and against MuJoCo C (float64).

Parity: the same model, start state and ctrl for 10 control steps (40 physics steps), standing (home pose, ctrl
noise up to 0.2 rad), walking (four frames of the shipped walk) and tipping over (home pose tilted 0.2-0.5 rad and
pushed: the feet slide and lift, contacts come and go). Tolerances: float32 against float64 physics (as MJWarp's
check, ``tests/sim/test_sim_parity.py``), widened where an actuator's force is clamped at its ``forcerange``: under
the implicitfast integrator MJX and MuJoCo C then treat the clamped actuator's damping derivative differently
(measured: a free-falling G1 with random joint angles, whose servos saturate, differs by 0.08 rad after one
control step; with ``forcelimited`` off, or the Euler integrator, by 4e-7). Largest differences measured on this
CPU (MuJoCo 4.0.0, mujoco-mjx 3.17.0, jax 0.10.2): standing qpos 1.4e-4, qvel 5e-3, body positions 1e-5,
quaternions 7e-5, linear / angular body velocities 4e-4 / 5e-3, foot forces 0.12 N; walking qpos 5e-3, qvel 0.09,
positions 5e-4, quaternions 3e-3, velocities 0.012 / 0.11, foot forces 12 N, up to 3 contacts apart in a
world at a touch-down; tipping qpos 5e-5, qvel 2e-3, quaternions 4e-5, velocities 1e-3 / 5e-3. On an AMD EPYC with
AVX-512 (MuJoCo 4.0.0 and 4.0.1 alike) the walk agrees to qpos 4e-4 / qvel 0.09 for 9 control steps, then a foot
touches down one substep apart in one world and the 10th step differs by qpos 0.038 (that ankle), qvel 0.69,
quaternions 0.016, velocities 0.031 / 0.72, foot forces 20 N: the walking bounds cover such a touch-down (a wrong
model or integrator moves every world by far more, and the standing and tipping checks stay tight). Every backend
here has the same number of worlds, so the process compiles MJX's calls once (and JAX's disk cache keeps them).
"""

import numpy as np
import pytest
import torch
import warp as wp

pytest.importorskip("jax", reason="sim=mjx needs the [mjx] extra")

from simppo.sim import MuJoCoSim, SimCfg, make_sim  # noqa: E402
from simppo.sim.mjx import MJXSim  # noqa: E402
from tests.sim.test_sim_parity import _run_and_compare, _walk_start, standing_ctrl  # noqa: E402

N = 4
STANDING = {"qpos": 1e-3, "qvel": 2e-2, "xpos": 1e-4, "xquat": 1e-3, "body_lin_vel_w": 1e-2, "body_ang_vel_w": 2e-2,
            "foot_contact_force": 1.0}
TIPPING = STANDING
WALK = {"qpos": 5e-2, "qvel": 1.0, "xpos": 5e-3, "xquat": 3e-2, "body_lin_vel_w": 0.1, "body_ang_vel_w": 1.0,
        "foot_contact_force": 50.0}


@pytest.fixture(scope="module")
def pair():
    return make_sim("g1", SimCfg(name="mjx"), num_envs=N, device="cpu"), MuJoCoSim("g1", SimCfg(threads=2),
                                                                                 num_envs=N)


def active_contacts(sim) -> torch.Tensor:
    """``[N]`` active contacts of the last substep (both backends fill MJWarp's flat layout)."""
    if isinstance(sim, MJXSim):
        return (sim._contact_views["efc_address"].view(N, -1) >= 0).sum(1)
    return torch.from_numpy((sim._con_efc[:, :, 0] >= 0).sum(1))


def run_and_compare(pair, qpos, qvel, ctrl, tol, steps=10, contact_slack=0):
    """The parity check of tests/sim/test_sim_parity.py, plus the active contact counts (within ``contact_slack``)."""
    def contacts_agree(step):
        counts = active_contacts(pair[0]), active_contacts(pair[1])
        assert (counts[0] - counts[1]).abs().max() <= contact_slack, (step, counts)

    _run_and_compare(pair, qpos, qvel, ctrl, tol, steps, check_step=contacts_agree)


def test_make_sim_builds_mjx_and_refuses_what_it_cannot_run():
    assert isinstance(make_sim("g1", SimCfg(name="mjx"), num_envs=N, device="cpu"), MJXSim)
    with pytest.raises(ValueError, match="CUDA devices only"):
        MJXSim("g1", SimCfg(name="mjx", mjx_impl="warp"), num_envs=N)
    with pytest.raises(ValueError, match="unknown implementation"):
        MJXSim("g1", SimCfg(name="mjx", mjx_impl="xla"), num_envs=N)


def test_missing_extra_is_one_line(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_jax(name, *args, **kwargs):
        if name == "jax" or name.startswith("jax."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_jax)
    with pytest.raises(ImportError, match=r"pip install -e '\.\[mjx\]'") as err:
        MJXSim("g1", SimCfg(name="mjx"), num_envs=N)
    assert "\n" not in str(err.value)


def test_views_alias_the_simulator_arrays_and_writes_reach_it(pair):
    s = pair[0]
    s.reset_all_home()
    for _ in range(2):  # every call returns new JAX arrays: the views follow them, still without a copy
        pointers = s.aliasing()
        assert all(jax_ptr == torch_ptr for jax_ptr, torch_ptr in pointers.values()), pointers
        s.step()
    assert s.state.xpos.ptr == s.xpos.data_ptr() and s.state.qvel.ptr == s.qvel.data_ptr()
    s.qpos[2, 2] += 0.5  # lift world 2 through the torch view: the next call reads it
    s.kinematics()
    assert s.xpos[2, 1, 2] > s.xpos[1, 1, 2] + 0.45
    s.reset_all_home()


def test_standing_parity_with_mujoco_c(pair):
    a = pair[0]
    run_and_compare(pair, a.home_qpos_t.expand(N, -1), torch.zeros(N, a.nv), standing_ctrl(a), STANDING)
    assert a.foot_contact.all()


def test_walking_parity_with_mujoco_c(pair):
    run_and_compare(pair, *_walk_start(N), WALK, contact_slack=4)  # a touch-down one substep apart


def test_tipping_over_parity_with_mujoco_c(pair):
    a = pair[0]
    qpos = a.home_qpos_t.expand(N, -1).clone()
    for w, angle in enumerate([0.2, 0.3, 0.4, 0.5]):
        qpos[w, 3:7] = torch.tensor([np.cos(angle / 2), np.sin(angle / 2), 0.0, 0.0])
    qvel = torch.zeros(N, a.nv)
    qvel[:, 3] = 1.0
    run_and_compare(pair, qpos, qvel, a.home_ctrl_t.expand(N, -1), TIPPING)


def test_masked_reset_and_state_dict(pair):
    s = pair[0]
    s.reset_all_home()
    s.ctrl.add_(0.1)
    s.step()
    before = {k: v.clone() for k, v in s.state_dict().items()}
    mask = torch.tensor([True, False, True, False])
    target = s.home_qpos_t.expand(N, -1).clone()
    target[:, 2] += 0.05
    s.reset_worlds(mask, target, torch.zeros(N, s.nv))
    assert torch.equal(s.qpos[~mask], before["qpos"][~mask]) and torch.equal(s.qvel[~mask], before["qvel"][~mask])
    assert torch.equal(s.qpos[mask], target[mask]) and not s.qvel[mask].any()
    saved = s.state_dict()
    s.step()
    after_one = s.qpos.clone()
    s.load_state_dict(saved)
    s.step()
    assert torch.equal(s.qpos, after_one)  # a restored state continues exactly
    s.reset_all_home()


def test_world_params_are_per_world_and_shared_without_copies():
    s = MJXSim("g1", SimCfg(name="mjx"), num_envs=N)
    p = s.enable_world_params()
    assert all(a == b for a, b in s.aliasing().values())
    wp.to_torch(p.body_mass)[1, 1:] *= 2.0  # world 1: every body twice as heavy
    for _ in range(5):
        s.step()
    force = s.foot_contact_force.sum(1)
    assert torch.allclose(force[[0, 2, 3]], force[0].expand(3))
    assert force[1] > 1.5 * force[0]


def test_what_mjx_cannot_simulate_is_refused_in_one_line(monkeypatch):
    from mujoco import mjx

    def unsupported(*args, **kwargs):
        raise NotImplementedError("collisions not implemented for (GeomType.CYLINDER, GeomType.MESH)\nmore")

    monkeypatch.setattr(mjx, "put_model", unsupported)
    with pytest.raises(ValueError, match=r"^sim=mjx \(jax\) cannot simulate g1: collisions not implemented") as err:
        MJXSim("g1", SimCfg(name="mjx"), num_envs=N)
    assert "\n" not in str(err.value)
