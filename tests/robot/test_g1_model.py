"""G1 MJCF and robot config: structure equals the tabulated Unitree G1 (literal expectations)."""

import mujoco
import numpy as np
import pytest

from simppo.robot import build_robot_model, load_mj_model, load_robot_cfg

G1_JOINTS = [
    "left_hip_pitch_joint", "left_hip_roll_joint", "left_hip_yaw_joint", "left_knee_joint",
    "left_ankle_pitch_joint", "left_ankle_roll_joint",
    "right_hip_pitch_joint", "right_hip_roll_joint", "right_hip_yaw_joint", "right_knee_joint",
    "right_ankle_pitch_joint", "right_ankle_roll_joint",
    "waist_yaw_joint", "waist_roll_joint", "waist_pitch_joint",
    "left_shoulder_pitch_joint", "left_shoulder_roll_joint", "left_shoulder_yaw_joint", "left_elbow_joint",
    "left_wrist_roll_joint", "left_wrist_pitch_joint", "left_wrist_yaw_joint",
    "right_shoulder_pitch_joint", "right_shoulder_roll_joint", "right_shoulder_yaw_joint",
    "right_elbow_joint",
    "right_wrist_roll_joint", "right_wrist_pitch_joint", "right_wrist_yaw_joint",
]  # fmt: skip
G1_RANGES = [
    (-2.5307, 2.8798), (-0.5236, 2.9671), (-2.7576, 2.7576), (-0.087267, 2.8798), (-0.87267, 0.5236),
    (-0.2618, 0.2618),
    (-2.5307, 2.8798), (-2.9671, 0.5236), (-2.7576, 2.7576), (-0.087267, 2.8798), (-0.87267, 0.5236),
    (-0.2618, 0.2618),
    (-2.618, 2.618), (-0.52, 0.52), (-0.52, 0.52),
    (-3.0892, 2.6704), (-1.5882, 2.2515), (-2.618, 2.618), (-1.0472, 2.0944), (-1.97222, 1.97222),
    (-1.61443, 1.61443), (-1.61443, 1.61443),
    (-3.0892, 2.6704), (-2.2515, 1.5882), (-2.618, 2.618), (-1.0472, 2.0944), (-1.97222, 1.97222),
    (-1.61443, 1.61443), (-1.61443, 1.61443),
]  # fmt: skip
G1_TOTAL_MASS = 33.341142  # kg, sum of the table's 30 body masses
G1_EFFORT = [88, 139, 88, 139, 50, 50, 88, 139, 88, 139, 50, 50, 88, 50, 50,
             25, 25, 25, 25, 25, 5, 5, 25, 25, 25, 25, 25, 5, 5]  # fmt: skip
G1_KP = {"left_hip_pitch_joint": 40.1792, "left_knee_joint": 99.0984, "left_ankle_pitch_joint": 28.5012,
         "left_shoulder_pitch_joint": 14.2506, "left_wrist_yaw_joint": 16.7783}  # fmt: skip


@pytest.fixture(scope="module")
def mjm():
    return load_mj_model("g1")


def test_joint_names_order_and_ranges(mjm):
    assert mjm.nq == 7 + 29 and mjm.nv == 6 + 29 and mjm.nu == 29
    assert mjm.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE
    assert mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_BODY, mjm.jnt_bodyid[0]) == "pelvis"
    names = [mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(1, mjm.njnt)]
    assert names == G1_JOINTS
    np.testing.assert_allclose(mjm.jnt_range[1:], np.array(G1_RANGES), atol=1e-9)
    assert mjm.jnt_limited[1:].all()
    act_names = [mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_ACTUATOR, a) for a in range(mjm.nu)]
    assert act_names == G1_JOINTS
    assert (mjm.actuator_trnid[:, 0] == np.arange(1, 30)).all()


def test_mass_actuators_and_options(mjm):
    total = mjm.body_subtreemass[1]
    assert abs(total - G1_TOTAL_MASS) / G1_TOTAL_MASS < 0.01
    np.testing.assert_allclose(mjm.actuator_forcerange[:, 1], G1_EFFORT)
    np.testing.assert_allclose(mjm.actuator_forcerange[:, 0], -np.array(G1_EFFORT, dtype=float))
    assert mjm.actuator_forcelimited.all()
    for name, kp in G1_KP.items():
        a = mjm.actuator(name).id
        assert mjm.actuator_gainprm[a, 0] == pytest.approx(kp)
        assert mjm.actuator_biasprm[a, 1] == pytest.approx(-kp)
    assert mjm.opt.timestep == pytest.approx(0.005)
    assert mjm.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    assert mjm.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC
    assert mjm.dof_armature[6] == pytest.approx(0.010178)
    # feet condim 3, other robot collision geoms condim 1, floor-only collision
    gnames = [mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_GEOM, g) or "" for g in range(mjm.ngeom)]
    foot = [g for g, n in enumerate(gnames) if "foot" in n]
    assert len(foot) == 14 and (mjm.geom_condim[foot] == 3).all()
    np.testing.assert_allclose(mjm.geom_friction[foot, 0], 0.6)
    key = mjm.key("home")
    assert key.qpos[2] == pytest.approx(0.783675)
    assert key.qpos[7 + G1_JOINTS.index("left_elbow_joint")] == pytest.approx(1.28)
    np.testing.assert_allclose(key.ctrl, key.qpos[7:])


def test_compiles_in_mjwarp(mjm):
    import mujoco_warp as mjw

    from simppo.utils.device import init_warp

    init_warp()
    m = mjw.put_model(mjm)
    d = mjw.put_data(mjm, mujoco.MjData(mjm), nworld=2, nconmax=64, njmax=160)
    assert m.nq == mjm.nq and d.qpos.shape == (2, mjm.nq)


def test_robot_cfg_and_indices(mjm):
    cfg = load_robot_cfg("g1")
    assert cfg.joint_names == G1_JOINTS
    assert cfg.anchor_body == "torso_link"
    assert len(cfg.tracked_bodies) == 14
    rm = build_robot_model(cfg, mjm)
    np.testing.assert_array_equal(rm.joint_qpos_adr, np.arange(7, 36))
    np.testing.assert_array_equal(rm.joint_dof_adr, np.arange(6, 35))
    np.testing.assert_array_equal(rm.actuator_ids, np.arange(29))
    assert rm.anchor_body_id == mjm.body("torso_link").id
    feet = [mjm.body("left_ankle_roll_link").id, mjm.body("right_ankle_roll_link").id]
    assert rm.feet_body_ids.tolist() == feet
    np.testing.assert_allclose(cfg.default_joint_pos, mjm.key("home").qpos[7:])
    # action scale = 0.25 * effort / kp
    expected = 0.25 * mjm.actuator_forcerange[:, 1] / mjm.actuator_gainprm[:, 0]
    np.testing.assert_allclose(rm.action_scale, expected, rtol=1e-5)


def test_cfg_errors(tmp_path):
    import yaml

    from simppo.paths import CONFIG_DIR

    data = yaml.safe_load((CONFIG_DIR / "robot" / "g1.yaml").read_text())
    bad = dict(data, colour="red")
    p = tmp_path / "bad_key.yaml"
    p.write_text(yaml.safe_dump(bad))
    with pytest.raises(ValueError, match=r"bad_key\.yaml.*unknown key.*colour"):
        load_robot_cfg(p)
    bad = dict(data, tracked_bodies=["pelvis", "no_such_link"])
    p = tmp_path / "bad_name.yaml"
    p.write_text(yaml.safe_dump(bad))
    with pytest.raises(ValueError, match=r"bad_name\.yaml: tracked_bodies: 'no_such_link'"):
        build_robot_model(load_robot_cfg(p))
    with pytest.raises(FileNotFoundError):
        load_robot_cfg("no_such_robot")


def test_stiff_home_hold_mujoco_c(mjm):
    """Home pose held by ×10 gains for 4 s on flat ground (MuJoCo C)."""
    m = load_mj_model("g1")
    m.actuator_gainprm[:, 0] *= 10
    m.actuator_biasprm[:, 1:3] *= 10
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, m.key("home").id)
    mujoco.mj_forward(m, d)
    z0 = d.qpos[2]
    feet = {m.body("left_ankle_roll_link").id, m.body("right_ankle_roll_link").id}
    for _ in range(800):
        mujoco.mj_step(m, d)
        assert abs(d.qpos[2] - z0) < 0.05
    touching = set(m.geom_bodyid[d.contact.geom[: d.ncon].ravel()].tolist())
    assert feet <= touching
