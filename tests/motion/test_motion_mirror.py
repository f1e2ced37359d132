"""Mirror augmentation (``simppo-pack --mirror``): the mirror image of a clip is the clip reflected in the root's
sagittal plane at its first frame, body for body (left and right swapped)."""

from __future__ import annotations

import numpy as np
import pytest

from simppo.motion.format import open_shard
from simppo.motion.index import resolve_shard_paths
from simppo.motion.kinematics import RobotKinematics
from simppo.motion.mirror import heading, mirror_qpos
from simppo.motion.pack import MotionPackError, PackOptions, pack_motions
from simppo.paths import MOTIONS_DIR
from simppo.robot.config import load_robot_cfg, robot_cfg_from_dict
from tests.motion.motion_testutil import tiny_robot

CLIPS = ("walk", "turn", "arm_wave", "squat")


@pytest.fixture(scope="module")
def g1():
    return RobotKinematics.from_robot("g1")


def clip_qpos(g1, name: str) -> np.ndarray:
    rows = np.loadtxt(MOTIONS_DIR / f"{name}.csv", delimiter=",", comments="#")
    return np.concatenate([rows[:, :7], rows[:, 7:][:, g1.input_to_qpos]], axis=1)


def swapped(names: list[str]) -> list[int]:
    """Index of each name's left/right counterpart (itself when it has none)."""
    other = [n.replace("left_", "\0").replace("right_", "left_").replace("\0", "right_") for n in names]
    return [names.index(o) for o in other]


def body_axis(quat: np.ndarray, axis: int) -> np.ndarray:
    """World direction ``[..., 3]`` of a body's ``axis`` (0: x, 1: y, 2: z) from its wxyz quaternion."""
    w, x, y, z = np.moveaxis(quat, -1, 0)
    cols = (np.stack([1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y)], -1),
            np.stack([2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x)], -1),
            np.stack([2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)], -1))
    return cols[axis]


def reflect(points: np.ndarray, origin: np.ndarray, yaw: float) -> np.ndarray:
    """``points [..., 3]`` reflected in the vertical plane through ``origin`` along ``yaw``."""
    n = np.array([-np.sin(yaw), np.cos(yaw), 0.0])
    d = points - origin
    return origin + d - 2.0 * (d @ n)[..., None] * n


@pytest.mark.parametrize("name", CLIPS)
def test_the_mirror_image_is_the_reflected_motion(g1, name):
    qpos = clip_qpos(g1, name)
    m = mirror_qpos(qpos, g1.mirror_partner, g1.mirror_sign)
    np.testing.assert_allclose(mirror_qpos(m, g1.mirror_partner, g1.mirror_sign), qpos, atol=1e-12)  # twice: back
    fk, fk_m = g1.forward(qpos), g1.forward(m)
    want = reflect(fk["body_pos"], qpos[0, :3], heading(qpos[0, 3:7]))[:, swapped(g1.body_names)]
    np.testing.assert_allclose(fk_m["body_pos"], want, atol=5e-5)  # the G1's MJCF is symmetric to ~1e-5 m
    # body x and z axes reflected, y axes reflected and reversed (each body frame mirrored in its sagittal plane)
    zero, yaw, sw = np.zeros(3), heading(qpos[0, 3:7]), swapped(g1.body_names)
    for axis, flip in ((0, 1.0), (1, -1.0), (2, 1.0)):
        got, orig = body_axis(fk_m["body_quat"], axis), body_axis(fk["body_quat"], axis)
        np.testing.assert_allclose(got, flip * reflect(orig, zero, yaw)[:, sw], atol=1e-6, err_msg=f"axis {axis}")
    # the feet stay on the ground: the lowest geometry of every frame is as high as in the clip
    np.testing.assert_allclose(fk_m["lowest_z"], fk["lowest_z"], atol=5e-5)
    np.testing.assert_allclose(fk_m["foot_lowest_z"], fk["foot_lowest_z"][:, ::-1], atol=5e-5)
    # same start and heading
    np.testing.assert_allclose(m[0, :3], qpos[0, :3], atol=1e-12)
    assert heading(m[0, 3:7]) == pytest.approx(heading(qpos[0, 3:7]), abs=1e-9)


def test_pack_mirror_adds_a_mirrored_copy_of_every_clip(tmp_path, g1):
    res = pack_motions([str(MOTIONS_DIR / "walk.csv"), str(MOTIONS_DIR / "squat.csv")], tmp_path / "p",
                       opts=PackOptions(mirror=True))
    assert res.num_motions == 4
    shard = open_shard(resolve_shard_paths([str(tmp_path / "p")])[0])
    m = {x.name: x for x in shard.header.motions}
    assert list(m) == ["walk", "walk_mirror", "squat", "squat_mirror"]
    contacts, body = shard.array("contacts"), shard.array("body_pos_w")
    for name in ("walk", "squat"):
        a, b = m[name], m[f"{name}_mirror"]
        assert a.num_frames == b.num_frames
        np.testing.assert_array_equal(contacts[b.start:b.start + b.num_frames],
                                      contacts[a.start:a.start + a.num_frames][:, ::-1])  # left and right feet swap
        root0 = body[a.start, 0]
        np.testing.assert_allclose(body[b.start, 0], root0, atol=1e-5)


def test_mirror_needs_a_map_and_free_names(tmp_path):
    with pytest.raises(MotionPackError, match="has no mirror map"):
        rows_file = tmp_path / "c.csv"
        from tests.motion.motion_testutil import tiny_clip, write_csv

        write_csv(rows_file, tiny_clip())
        pack_motions([str(rows_file)], tmp_path / "p0", robot=tiny_robot(), opts=PackOptions(mirror=True))
    (tmp_path / "m.yaml").write_text(f"motions:\n  - {MOTIONS_DIR / 'walk.csv'}\n"
                                     f"  - {{file: {MOTIONS_DIR / 'turn.csv'}, name: walk_mirror}}\n")
    with pytest.raises(MotionPackError, match="walk_mirror, which is already a motion's name"):
        pack_motions([str(tmp_path / "m.yaml")], tmp_path / "p1", opts=PackOptions(mirror=True))


def test_robot_config_checks_its_mirror_map():
    data = {k: v for k, v in vars(load_robot_cfg("g1")).items() if k != "source"}
    for bad, message in ((dict(mirror_pairs=[["left_knee_joint"]]), "pairs"),
                         (dict(mirror_pairs=[["left_knee_joint", "left_knee_joint"]]), "pairs"),
                         (dict(mirror_negate=["tail_joint"]), "unknown joints \\['tail_joint'\\]")):
        with pytest.raises(ValueError, match=message):
            robot_cfg_from_dict({**data, **bad}, source="g1.yaml")
