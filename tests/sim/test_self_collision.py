"""``sim.self_collision``: robot-robot contacts are counted on both backends, never at the home pose."""

import mujoco
import numpy as np
import pytest
import torch

from simppo.robot.config import load_robot_cfg
from simppo.robot.model import load_mj_model
from simppo.sim import make_sim
from simppo.sim.config import SimCfg


def _crossed_legs_qpos(m: mujoco.MjModel) -> np.ndarray:
    """Home pose in the air with the left leg swung across the right one (hip roll / yaw)."""
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, "home"))
    q = d.qpos.copy()
    q[2] = 2.0
    for name, value in (("left_hip_roll_joint", -0.5), ("right_hip_roll_joint", 0.5)):
        q[m.jnt_qposadr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, name)]] = value
    return q


def _self_contacts_c(m: mujoco.MjModel, qpos: np.ndarray) -> int:
    d = mujoco.MjData(m)
    d.qpos[:] = qpos
    mujoco.mj_forward(m, d)
    return sum(1 for c in d.contact[:d.ncon] if m.geom_bodyid[c.geom[0]] > 0 and m.geom_bodyid[c.geom[1]] > 0)


def test_self_collision_model_excludes_touching_pairs_only():
    cfg = load_robot_cfg("g1")
    off, on = load_mj_model(cfg), load_mj_model(cfg, self_collision=True)
    assert off.nexclude == 0 and on.nexclude > 0
    q = _crossed_legs_qpos(on)
    assert _self_contacts_c(off, q) == 0
    assert _self_contacts_c(on, q) > 0
    home = on.key_qpos[mujoco.mj_name2id(on, mujoco.mjtObj.mjOBJ_KEY, "home")]
    assert _self_contacts_c(on, home) == 0


@pytest.mark.parametrize("backend", ["mjwarp", "mujoco"])
def test_backends_count_self_contacts(backend):
    sim = make_sim(load_robot_cfg("g1"), SimCfg(name=backend, self_collision=True), num_envs=2, device="cpu")
    sim.reset_all_home()
    sim.forward()
    assert torch.equal(sim.self_contacts, torch.zeros(2))
    q = torch.tensor(_crossed_legs_qpos(sim.mj_model), dtype=torch.float32)
    sim.qpos[1] = q
    sim.forward()
    want = _self_contacts_c(sim.mj_model, q.double().numpy())
    assert sim.self_contacts[0] == 0 and sim.self_contacts[1] == want > 0
    sim.close()
