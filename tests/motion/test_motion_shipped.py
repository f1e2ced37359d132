"""The shipped G1 sample clips: loadable by default, reproducible from their CSVs, physically consistent."""

from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch
import yaml

from simppo.motion import DEFAULT_MOTIONS, MotionCfg, MotionLib
from simppo.motion.format import ShardFormatError
from simppo.motion.kinematics import RobotKinematics, geom_lowest_z
from simppo.motion.pack import pack_motions
from simppo.paths import CONFIG_DIR, MOTIONS_DIR
from tests.motion.motion_testutil import g1_robot_digest
from tools.synth import CLIP_NAMES

CM = 0.01


@pytest.fixture(scope="module")
def lib():
    return MotionLib([str(DEFAULT_MOTIONS)], robot_digest=g1_robot_digest())


def test_default_config_points_at_shipped_pack(lib):
    cfg = MotionCfg()
    assert [Path(f).resolve() for f in cfg.resolved_files()] == [DEFAULT_MOTIONS.resolve()]
    assert yaml.safe_load((CONFIG_DIR / "motion/default.yaml").read_text()) == {"files": cfg.files}
    assert lib.motion_names == list(CLIP_NAMES) and "stand_sway" in lib.motion_names
    assert all(f == 30.0 for f in lib.motion_fps)
    assert bool(((lib.motion_lengths >= 3.0) & (lib.motion_lengths <= 6.0)).all())
    size = sum(p.stat().st_size for p in MOTIONS_DIR.rglob("*") if p.is_file())
    assert size < 2 * 2**20, size


def test_shipped_pack_is_reproducible_from_csvs(tmp_path, lib):
    pack_motions([MOTIONS_DIR / f"{n}.csv" for n in CLIP_NAMES], tmp_path / "p", robot="g1")
    fresh = MotionLib([str(tmp_path / "p")])
    assert fresh.motion_names == lib.motion_names
    for k, v in lib.frames.items():
        assert torch.equal(fresh.frames[k], v), k


def test_shipped_clips_are_physically_consistent(lib):
    rk = RobotKinematics.from_robot("g1")
    m, d = rk.model, mujoco.MjData(rk.model)
    feet = np.array(rk.foot_body_ids)
    assert lib.contact_bodies == rk.feet and lib.num_contacts == 2
    fr = {k: v.numpy().astype(np.float64) for k, v in lib.frames.items()}
    for i, name in enumerate(lib.motion_names):
        s, n = int(lib.motion_start[i]), int(lib.motion_num_frames[i])
        dt = float(lib.motion_dt[i])
        qpos = np.concatenate([fr["root_pos"][s : s + n], fr["root_quat"][s : s + n], fr["dof_pos"][s : s + n]], 1)
        contact = fr["contacts"][s : s + n] > 0.5
        lowest_all = np.empty(n)
        foot_low = np.empty((n, 2))
        foot_xy = np.empty((n, 2, 2))
        for t in range(n):
            d.qpos[:] = qpos[t]
            mujoco.mj_kinematics(m, d)
            g = rk.collision_geoms
            lowest_all[t] = geom_lowest_z(m, g, d.geom_xpos[g], d.geom_xmat[g]).min()
            for c, gs in enumerate(rk.foot_geoms):
                foot_low[t, c] = geom_lowest_z(m, gs, d.geom_xpos[gs], d.geom_xmat[gs]).min()
            foot_xy[t] = d.xpos[feet, :2]
        # no penetration beyond 1 cm, anywhere, ever
        assert lowest_all.min() >= -CM, (name, lowest_all.min())
        # always supported; stance feet on the ground (lowest foot point within 1 cm of z = 0)
        assert contact.any(axis=1).all(), name
        assert np.all(np.abs(foot_low[contact]) <= CM), (name, np.abs(foot_low[contact]).max())
        # no sliding in stance: each contiguous contact run stays within 1 cm horizontally
        for c in range(2):
            t = 0
            while t < n:
                if not contact[t, c]:
                    t += 1
                    continue
                e = t
                while e + 1 < n and contact[e + 1, c]:
                    e += 1
                drift = np.linalg.norm(foot_xy[t : e + 1, c] - foot_xy[t, c], axis=-1).max()
                assert drift <= CM, (name, c, t, e, drift)
                t = e + 1
        # joints within limits (no tolerance)
        dof = qpos[:, 7:]
        assert np.all(dof >= rk.joint_lower - 1e-6) and np.all(dof <= rk.joint_upper + 1e-6), name
        # smooth: bounded joint speed / acceleration and root acceleration, no jumps
        qd = np.diff(dof, axis=0) / dt
        qdd = np.diff(dof, 2, axis=0) / dt**2
        rdd = np.diff(qpos[:, :3], 2, axis=0) / dt**2
        assert np.abs(qd).max() < 6.0, (name, np.abs(qd).max())
        assert np.abs(qdd).max() < 150.0, (name, np.abs(qdd).max())
        assert np.linalg.norm(rdd, axis=-1).max() < 5.0, (name, np.linalg.norm(rdd, axis=-1).max())
        # quaternions are unit and sign-continuous
        rq = qpos[:, 3:7]
        np.testing.assert_allclose(np.linalg.norm(rq, axis=-1), 1.0, atol=1e-5)
        assert np.all(np.sum(rq[1:] * rq[:-1], -1) > 0.99), name
    # stepping clips really step: each foot is off the ground for part of the clip
    for name in ("step_in_place", "walk", "turn"):
        i = lib.motion_id(name)
        s, n = int(lib.motion_start[i]), int(lib.motion_num_frames[i])
        frac = fr["contacts"][s : s + n].mean(axis=0)
        assert np.all(frac < 0.95) and np.all(frac > 0.4), (name, frac)
    i = lib.motion_id("walk")
    s, n = int(lib.motion_start[i]), int(lib.motion_num_frames[i])
    assert fr["root_pos"][s + n - 1, 0] - fr["root_pos"][s, 0] > 0.8  # it goes somewhere


def test_motions_for_another_robot_are_refused():
    with pytest.raises(ShardFormatError, match="robot digest"):
        MotionLib([str(DEFAULT_MOTIONS)], robot_digest="0" * 64, robot_name="configs/robot/other.yaml")
