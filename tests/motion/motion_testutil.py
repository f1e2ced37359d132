"""Shared helpers for the motion tests: a tiny MJCF humanoid-ish robot and clip writers."""

from __future__ import annotations

import mujoco
import numpy as np

from simppo.motion.kinematics import RobotKinematics

TINY_XML = """
<mujoco model="tiny">
  <compiler angle="radian" autolimits="true"/>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 0.05" contype="0" conaffinity="1"/>
    <body name="pelvis" pos="0 0 0.5">
      <freejoint name="root"/>
      <geom type="sphere" size="0.06" contype="1" conaffinity="0"/>
      <body name="l_thigh" pos="0 0.08 -0.05">
        <joint name="l_hip" type="hinge" axis="0 1 0" range="-1.5 1.5"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.03" contype="1" conaffinity="0"/>
        <body name="l_foot" pos="0 0 -0.22">
          <joint name="l_knee" type="hinge" axis="0 1 0" range="0 2.0"/>
          <geom type="capsule" fromto="0 0 -0.2 0.1 0 -0.2" size="0.02" contype="1" conaffinity="0"/>
        </body>
      </body>
      <body name="r_thigh" pos="0 -0.08 -0.05">
        <joint name="r_hip" type="hinge" axis="0 1 0" range="-1.5 1.5"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.03" contype="1" conaffinity="0"/>
        <body name="r_foot" pos="0 0 -0.22">
          <joint name="r_knee" type="hinge" axis="0 1 0" range="0 2.0"/>
          <geom type="box" pos="0.05 0 -0.2" size="0.06 0.03 0.02" contype="1" conaffinity="0"/>
        </body>
      </body>
      <body name="arm" pos="0 0 0.1">
        <joint name="shoulder" type="hinge" axis="1 0 0" range="-2 2"/>
        <geom type="capsule" fromto="0 0 0 0 0.2 0" size="0.02" contype="1" conaffinity="0"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""
# the "robot's joint order" of the inputs deliberately differs from the MJCF order
TINY_INPUT_JOINTS = ["shoulder", "l_hip", "l_knee", "r_hip", "r_knee"]


def tiny_robot() -> RobotKinematics:
    model = mujoco.MjModel.from_xml_string(TINY_XML)
    return RobotKinematics("tiny", model, feet=["l_foot", "r_foot"], input_joint_names=TINY_INPUT_JOINTS)


def tiny_clip(T: int = 40, seed: int = 0, fps: float = 30.0) -> np.ndarray:
    """Smooth input rows [T, 7 + 5] (root pos, root quat wxyz, joints in TINY_INPUT_JOINTS order)."""
    rng = np.random.default_rng(seed)
    t = np.arange(T) / fps
    rows = np.zeros((T, 12))
    rows[:, 0] = 0.3 * t + rng.uniform(-1, 1)
    rows[:, 1] = 0.1 * np.sin(2 * t)
    rows[:, 2] = 0.5 + 0.02 * np.sin(3 * t)
    yaw = 0.8 * t + rng.uniform(-3, 3)
    roll = 0.2 * np.sin(1.5 * t)
    # q = yaw (z) * roll (x)
    qz = np.stack([np.cos(yaw / 2), 0 * yaw, 0 * yaw, np.sin(yaw / 2)], -1)
    qx = np.stack([np.cos(roll / 2), np.sin(roll / 2), 0 * roll, 0 * roll], -1)
    from simppo.motion.kinematics import quat_mul

    rows[:, 3:7] = quat_mul(qz, qx)
    rows[:, 7] = 0.5 * np.sin(1.3 * t + rng.uniform(0, 3))  # shoulder
    rows[:, 8] = 0.3 * np.sin(2.0 * t)  # l_hip
    rows[:, 9] = 0.6 + 0.3 * np.sin(2.0 * t)  # l_knee
    rows[:, 10] = -0.3 * np.sin(2.0 * t)  # r_hip
    rows[:, 11] = 0.6 - 0.3 * np.sin(2.0 * t)  # r_knee
    return rows


def write_csv(path, rows, header: str | None = None) -> None:
    with open(path, "w") as fh:
        if header:
            fh.write(header + "\n")
        for r in rows:
            fh.write(",".join(repr(float(v)) for v in r) + "\n")


def g1_robot_digest() -> str:
    """Robot digest (joint then body names) of simppo's G1 model, as the env computes it."""
    from simppo.motion.format import robot_digest
    from simppo.robot.config import load_robot_cfg
    from simppo.robot.model import build_robot_model

    r = build_robot_model(load_robot_cfg("g1"))
    return robot_digest(r.cfg.joint_names, r.body_names[1:])


def use_tiny_robot(monkeypatch) -> None:
    """``--robot tiny`` (and ``RobotKinematics.from_robot("tiny")`` in the packer) builds the test model; g1 stays
    real."""
    from simppo.motion import pack as pack_mod

    real = pack_mod.RobotKinematics.from_robot
    monkeypatch.setattr(pack_mod.RobotKinematics, "from_robot",
                        classmethod(lambda cls, name: tiny_robot() if name == "tiny" else real(name)))


def pack_cli_error(capsys, args: list[str]) -> str:
    """Run simppo-pack expecting exit 2 and exactly one stderr line; returns the message after the prefix."""
    from simppo.cli.pack import main

    rc = main(args)
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert err.startswith("simppo-pack: error: ") and "\n" not in err, err
    return err[len("simppo-pack: error: "):]
