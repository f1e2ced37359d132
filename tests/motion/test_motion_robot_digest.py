"""Issue 13, defect 3: a pack built for another MJCF with the same number of bodies is refused by the env
(the robot digest of joint and body names is checked, not only the body count)."""

import dataclasses
from pathlib import Path

import pytest

from simppo.envs.imitation import HumanoidImitationEnv, HumanoidImitationEnvCfg
from simppo.motion.config import MotionCfg
from simppo.motion.format import ShardFormatError, read_header
from simppo.motion.kinematics import RobotKinematics
from simppo.motion.pack import pack_motions
from simppo.paths import ASSETS_DIR, MOTIONS_DIR
from simppo.robot.config import RobotCfg, load_robot_cfg
from simppo.robot.model import load_mj_model
from simppo.sim.config import SimCfg


def g1_variant(folder: Path) -> tuple[RobotCfg, Path]:
    """A G1 whose MJCF renames one body (same nbody, same joints), and the walk clip packed for it."""
    xml = (ASSETS_DIR / "g1" / "g1.xml").read_text()
    assert xml.count('name="waist_roll_link"') == 1
    (folder / "g1_v2.xml").write_text(xml.replace('name="waist_roll_link"', 'name="waist_roll_link_v2"'))
    cfg = dataclasses.replace(load_robot_cfg("g1"), name="g1_v2", mjcf=str(folder / "g1_v2.xml"),
                              source=str(folder / "g1_v2.yaml"))
    rk = RobotKinematics(cfg.name, load_mj_model(cfg), feet=list(cfg.feet), input_joint_names=list(cfg.joint_names))
    pack_motions([MOTIONS_DIR / "walk.csv"], folder / "pack", robot=rk)
    return cfg, folder / "pack"


def test_pack_for_another_mjcf_with_the_same_nbody_is_refused(tmp_path):
    cfg, pack = g1_variant(tmp_path)
    h = read_header(pack / "shard_00000.sms")
    g1 = load_robot_cfg("g1")
    assert len(h.body_names) == load_mj_model(g1).nbody - 1 and h.joint_names == g1.joint_names
    with pytest.raises(ShardFormatError, match=r"shard_00000.sms: packed for robot 'g1_v2' whose joint/body names "
                                               r"differ from .*g1.yaml \(robot digest"):
        HumanoidImitationEnv(HumanoidImitationEnvCfg(), num_envs=2, device="cpu", sim_cfg=SimCfg(name="mujoco"),
                             motion_cfg=MotionCfg(files=[str(pack)]))
    # the variant robot itself loads its pack
    env = HumanoidImitationEnv(HumanoidImitationEnvCfg(), num_envs=2, device="cpu", robot_cfg=cfg,
                               sim_cfg=SimCfg(name="mujoco"), motion_cfg=MotionCfg(files=[str(pack)]))
    assert env.motion_lib.motion_names == ["walk"]
    env.close()
