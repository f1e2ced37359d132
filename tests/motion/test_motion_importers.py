"""simppo-pack reads the formats datasets ship in: Unitree / LAFAN1 G1 CSV (xyzw), BeyondMimic / mjlab motion NPZ
and ProtoMotions ``.motion`` archives. Each fixture is written here, in the real layout, from a shipped clip; the
formats of one motion must give the same shard contents as its CSV."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from simppo.cli.pack import main as pack_main
from simppo.motion.format import open_shard
from simppo.motion.index import resolve_shard_paths
from simppo.motion.kinematics import RobotKinematics
from simppo.motion.pack import MotionPackError, PackOptions, pack_motions
from simppo.paths import MOTIONS_DIR

FIELDS = ("root_pos", "root_quat", "dof_pos", "body_pos_w", "body_quat_w", "body_lin_vel_w", "contacts")


@pytest.fixture(scope="module")
def g1():
    return RobotKinematics.from_robot("g1")


@pytest.fixture(scope="module")
def walk(g1):
    """The shipped walk: input rows [T, 36] (root pos, root quat wxyz, joints in input order) and its FK."""
    rows = np.loadtxt(MOTIONS_DIR / "walk.csv", delimiter=",", comments="#")[:60]
    qpos = np.concatenate([rows[:, :7], rows[:, 7:][:, g1.input_to_qpos]], axis=1)
    return rows, g1.forward(qpos, with_ground=False)


def motions(pack) -> dict[str, dict[str, np.ndarray]]:
    out = {}
    for path in resolve_shard_paths([str(pack)]):
        shard = open_shard(path)
        for m in shard.header.motions:
            out[m.name] = {f: np.asarray(shard.array(f)[m.start:m.start + m.num_frames], dtype=np.float64)
                           for f in FIELDS}
    return out


def assert_same_motion(a: dict, b: dict, atol: float = 1e-5) -> None:
    for f in FIELDS:
        np.testing.assert_allclose(a[f], b[f], atol=atol, err_msg=f)


def write_csv_xyzw(path, rows) -> None:
    """Unitree's LAFAN1 retarget layout: no header, x y z qx qy qz qw, 29 joints."""
    xyzw = np.concatenate([rows[:, :3], rows[:, [4, 5, 6, 3]], rows[:, 7:]], axis=1)
    np.savetxt(path, xyzw, delimiter=",", fmt="%.9f")


def write_mjlab_npz(path, rows, fk, fps=30.0) -> None:
    """BeyondMimic / mjlab's motion NPZ: bodies in the MJCF's order (the pelvis first), quaternions wxyz."""
    dt = 1.0 / fps
    np.savez(path, fps=np.array([fps]), joint_pos=rows[:, 7:].astype(np.float32),
             joint_vel=np.gradient(rows[:, 7:], dt, axis=0).astype(np.float32),
             body_pos_w=fk["body_pos"].astype(np.float32), body_quat_w=fk["body_quat"].astype(np.float32),
             body_lin_vel_w=np.gradient(fk["body_pos"], dt, axis=0).astype(np.float32),
             body_ang_vel_w=np.zeros_like(fk["body_pos"], dtype=np.float32))


class StateConversion:
    """Stands for ProtoMotions' own pickled objects; its module is renamed to one that does not exist."""

    def __init__(self):
        self.mode = "retarget"


def write_protomotions(path, rows, fk, fps=30, extra_object=True) -> None:
    """A ProtoMotions ``.motion``: ``torch.save`` of a dict; bodies [T, 33] (the robot's 30 and three more, as
    ProtoMotions' G1 has head and hand bodies), rotations xyzw."""
    pos = torch.tensor(fk["body_pos"], dtype=torch.float32)
    rot = torch.tensor(fk["body_quat"][..., [1, 2, 3, 0]], dtype=torch.float32)
    extra = pos[:, [15, 22, 29]] + torch.tensor([0.0, 0.0, 0.3])  # above the torso and the wrists
    d = {"fps": fps, "dof_pos": torch.tensor(rows[:, 7:], dtype=torch.float32),
         "dof_vel": torch.zeros(len(rows), 29), "rigid_body_pos": torch.cat([pos, extra], 1),
         "rigid_body_rot": torch.cat([rot, rot[:, [15, 22, 29]]], 1), "rigid_body_vel": torch.zeros(len(rows), 33, 3),
         "rigid_body_ang_vel": torch.zeros(len(rows), 33, 3), "rigid_body_contacts": torch.zeros(len(rows), 33)}
    if extra_object:
        d["state_conversion"] = StateConversion()
    module = StateConversion.__module__
    StateConversion.__module__ = "protomotions_stand_in_module"
    sys.modules["protomotions_stand_in_module"] = sys.modules[__name__]
    try:
        torch.save(d, path)
    finally:
        StateConversion.__module__ = module
        del sys.modules["protomotions_stand_in_module"]


def test_a_protomotions_clip_sunk_in_part_has_only_those_frames_lifted(tmp_path, walk, g1):
    """A clip of which only the first half second sinks (up to 8 cm, as the real crouch-to-run's tiptoe crouch):
    raised whole it would float for over a second, so ``--fix-height auto`` lifts each sinking frame just onto the floor
    and leaves the others as they are; ``all`` raises it whole, with the float warning."""
    rows, fk = walk
    depth = np.where(np.arange(len(rows)) < 15, 0.04 * (1 + np.cos(np.pi * np.arange(len(rows)) / 15)), 0.0)
    sunk, fk_sunk = rows.copy(), {k: v.copy() for k, v in fk.items()}
    sunk[:, 2] -= depth
    fk_sunk["body_pos"][..., 2] -= depth[:, None]
    write_protomotions(tmp_path / "crouch.motion", sunk, fk_sunk, extra_object=False)
    qpos = np.concatenate([sunk[:, :7], sunk[:, 7:][:, g1.input_to_qpos]], axis=1)
    lowest = g1.forward(qpos)["lowest_z"]
    assert lowest.min() < -0.07

    res = pack_motions([tmp_path / "crouch.motion"], tmp_path / "auto", robot=g1)
    lifted = [n for n in res.notes if "lifted onto the floor one by one" in n]
    assert len(lifted) == 1 and float(lifted[0].split("off the floor for ")[1].split(" s")[0]) > 1.0, res.notes
    assert not any("floats" in w for w in res.warnings), res.warnings
    packed = motions(tmp_path / "auto")["crouch"]
    packed_qpos = np.concatenate([packed["root_pos"], packed["root_quat"], packed["dof_pos"]], axis=1)
    np.testing.assert_allclose(g1.forward(packed_qpos)["lowest_z"], np.maximum(lowest, 0.0), atol=1e-5)
    on_floor = lowest >= 0
    np.testing.assert_allclose(packed["root_pos"][on_floor, 2], sunk[on_floor, 2], atol=1e-5)

    res = pack_motions([tmp_path / "crouch.motion"], tmp_path / "all", robot=g1, opts=PackOptions(fix_height="all"))
    assert any("--fix-height raised the whole clip by 0.0" in w for w in res.warnings), res.warnings
    np.testing.assert_allclose(motions(tmp_path / "all")["crouch"]["root_pos"][:, 2], sunk[:, 2] - lowest.min(),
                               atol=1e-5)


def test_the_formats_of_one_motion_pack_alike(tmp_path, walk, capsys):
    rows, fk = walk
    np.savetxt(tmp_path / "walk_wxyz.csv", rows, delimiter=",", fmt="%.9f")
    write_csv_xyzw(tmp_path / "walk_xyzw.csv", rows)
    write_mjlab_npz(tmp_path / "walk_mjlab.npz", rows, fk)
    write_protomotions(tmp_path / "walk.motion", rows, fk)
    (tmp_path / "all.yaml").write_text(
        "motions:\n  - {file: walk_wxyz.csv, quat_order: wxyz}\n  - walk_xyzw.csv\n  - walk_mjlab.npz\n"
        "  - walk.motion\n")
    # --quat-order xyzw (the LAFAN1 CSVs' order) does not apply to formats that define their own
    assert pack_main([str(tmp_path / "all.yaml"), "--out", str(tmp_path / "pack"), "--quat-order", "xyzw"]) == 0
    out = capsys.readouterr().out
    assert "protomotions_stand_in_module" not in sys.modules
    assert "state_conversion (protomotions_stand_in_module.StateConversion)" in out  # skipped, and said so
    notes = [line for line in out.splitlines() if "reproduce the file's body positions" in line]
    assert len(notes) == 2 and all("within 0.0000 m" in n for n in notes), notes  # mjlab and ProtoMotions
    assert "nearest of the file's 33" in out
    got = motions(tmp_path / "pack")
    for name in ("walk_xyzw", "walk_mjlab", "walk"):
        assert_same_motion(got[name], got["walk_wxyz"])


def test_recursive_directories_and_the_manifest_format_key(tmp_path, walk):
    rows, fk = walk
    (tmp_path / "data" / "jumps").mkdir(parents=True)
    np.savetxt(tmp_path / "data" / "a.csv", rows, delimiter=",", fmt="%.9f")
    write_mjlab_npz(tmp_path / "data" / "jumps" / "b.npz", rows, fk)
    (tmp_path / "only_sub" / "inner").mkdir(parents=True)
    np.savetxt(tmp_path / "only_sub" / "inner" / "c.csv", rows, delimiter=",", fmt="%.9f")
    with pytest.raises(MotionPackError, match="--recursive walks its sub-directories"):
        pack_motions([str(tmp_path / "only_sub")], tmp_path / "p1")
    res = pack_motions([str(tmp_path / "data")], tmp_path / "p2", opts=PackOptions(recursive=True))
    assert res.num_motions == 2
    assert sorted(motions(tmp_path / "p2")) == ["a", "jumps/b"]
    # a file whose suffix says nothing: the manifest names its format
    write_protomotions(tmp_path / "clip.pt", rows, fk, extra_object=False)
    (tmp_path / "m.yaml").write_text("motions:\n  - {file: clip.pt, format: protomotions}\n")
    assert pack_motions([str(tmp_path / "m.yaml")], tmp_path / "p3").num_motions == 1
    (tmp_path / "bad.yaml").write_text("motions:\n  - {file: clip.pt, format: bvh}\n")
    with pytest.raises(MotionPackError, match="format must be one of"):
        pack_motions([str(tmp_path / "bad.yaml")], tmp_path / "p4")


def _pack_error(tmp_path, capsys, path) -> str:
    assert pack_main([str(path), "--out", str(tmp_path / f"out_{path.stem}")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err, err
    assert not (tmp_path / f"out_{path.stem}").exists()
    return err


def test_bad_dataset_files_get_one_line_errors(tmp_path, walk, capsys):
    rows, fk = walk
    write_protomotions(tmp_path / "good.motion", rows, fk, extra_object=False)
    data = (tmp_path / "good.motion").read_bytes()
    (tmp_path / "truncated.motion").write_bytes(data[: len(data) // 2])
    assert "not a torch zip archive" in _pack_error(tmp_path, capsys, tmp_path / "truncated.motion")
    torch.save({"fps": 30, "dof_pos": torch.zeros(10, 28), "rigid_body_pos": torch.zeros(10, 33, 3),
                "rigid_body_rot": torch.zeros(10, 33, 4)}, tmp_path / "joints.motion")
    assert "dof_pos: shape (10, 28), expected [frames, 29]" in _pack_error(tmp_path, capsys, tmp_path / "joints.motion")
    torch.save({"fps": 30, "dof_pos": torch.zeros(10, 29)}, tmp_path / "fields.motion")
    assert "lacks ['rigid_body_pos', 'rigid_body_rot']" in _pack_error(tmp_path, capsys, tmp_path / "fields.motion")
    torch.save([1, 2], tmp_path / "list.motion")
    assert "expected a dict" in _pack_error(tmp_path, capsys, tmp_path / "list.motion")
    nan = rows.copy()
    nan[5, 10] = np.nan
    write_mjlab_npz(tmp_path / "nan.npz", nan, fk)
    assert "non-finite" in _pack_error(tmp_path, capsys, tmp_path / "nan.npz")
    np.savez(tmp_path / "frames.npz", fps=np.array([50.0]), joint_pos=np.zeros((10, 29)),
             body_pos_w=np.zeros((9, 30, 3)), body_quat_w=np.zeros((10, 30, 4)))
    assert "frame counts differ" in _pack_error(tmp_path, capsys, tmp_path / "frames.npz")
    (tmp_path / "clip.bvh").write_text("HIERARCHY\n")
    assert "unsupported input type '.bvh'" in _pack_error(tmp_path, capsys, tmp_path / "clip.bvh")


def test_protomotions_clips_are_put_on_the_floor_as_protomotions_loads_them(tmp_path, walk):
    rows, fk = walk
    sunk, fk_sunk = rows.copy(), {k: v.copy() for k, v in fk.items()}
    sunk[:, 2] -= 0.08  # ProtoMotions' loader moves each clip onto the floor, so its files need not be
    fk_sunk["body_pos"][..., 2] -= 0.08
    write_protomotions(tmp_path / "sunk.motion", sunk, fk_sunk, extra_object=False)
    np.savetxt(tmp_path / "walk.csv", rows, delimiter=",", fmt="%.9f")
    np.savetxt(tmp_path / "sunk.csv", sunk, delimiter=",", fmt="%.9f")
    reference = motions(pack_motions([tmp_path / "walk.csv"], tmp_path / "ref").out_dir)["walk"]
    res = pack_motions([tmp_path / "sunk.motion"], tmp_path / "auto")  # default: --fix-height auto
    assert any("raised by 0.08" in n and "touches the floor" in n for n in res.notes), res.notes
    assert_same_motion(motions(tmp_path / "auto")["sunk"], reference)
    with pytest.raises(MotionPackError, match="below the ground"):  # other formats are taken as they are ...
        pack_motions([tmp_path / "sunk.csv"], tmp_path / "csv")
    with pytest.raises(MotionPackError, match="below the ground"):  # ... and so is any file with none
        pack_motions([tmp_path / "sunk.motion"], tmp_path / "none", opts=PackOptions(fix_height="none"))
    pack_motions([tmp_path / "sunk.csv"], tmp_path / "all", opts=PackOptions(fix_height="all"))
    assert_same_motion(motions(tmp_path / "all")["sunk"], reference)
    assert not (tmp_path / "csv").exists() and not (tmp_path / "none").exists()
    mirrored = motions(pack_motions([tmp_path / "sunk.motion"], tmp_path / "mirror",
                                    opts=PackOptions(mirror=True)).out_dir)  # the mirror image is raised too
    np.testing.assert_allclose(mirrored["sunk_mirror"]["root_pos"][:, 2], reference["root_pos"][:, 2], atol=1e-5)
