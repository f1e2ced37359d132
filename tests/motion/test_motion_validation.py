"""Issue 13, defects 2 and 3: inputs that simppo-pack and the shard reader used to accept silently."""

import json
import struct
import zlib

import numpy as np
import pytest

from simppo.cli.pack import main
from simppo.motion import MotionLib
from simppo.motion.format import ShardFormatError, read_header
from simppo.motion.kinematics import RobotKinematics
from simppo.motion.pack import PackOptions, pack_motions
from simppo.paths import MOTIONS_DIR
from tests.motion.motion_testutil import pack_cli_error, tiny_clip, tiny_robot, use_tiny_robot, write_csv


@pytest.fixture(autouse=True)
def _tiny_robot(monkeypatch):
    use_tiny_robot(monkeypatch)


def _err(capsys, args) -> str:
    return pack_cli_error(capsys, args)


def rewrite_shard(src, dst, mutate) -> None:
    """Copy shard ``src`` to ``dst`` with its JSON header changed by ``mutate(dict)``; the arrays keep their
    bytes and move (offsets and file_size follow) when the header grows past the old data start."""
    raw = src.read_bytes()
    magic, version, _, hlen = struct.unpack("<8sIIQ", raw[:24])
    d = json.loads(raw[24:24 + hlen])
    start = min(f["offset"] for f in d["fields"].values())
    mutate(d)
    hb = json.dumps(d).encode()
    new_start = max(start, (24 + len(hb) + 63) // 64 * 64)
    delta = new_start - start
    if delta:
        for f in d["fields"].values():
            if isinstance(f.get("offset"), int):
                f["offset"] += delta
        d["file_size"] += delta
        hb = json.dumps(d).encode()
    pad = new_start - 24 - len(hb)
    assert pad >= 0
    crc = zlib.crc32(hb)  # a well-formed file whose header says what ``mutate`` made it say
    dst.write_bytes(struct.pack("<8sIIQ", magic, version, crc, len(hb)) + hb + b"\0" * pad + raw[start:])


@pytest.fixture(scope="module")
def tiny_shard(tmp_path_factory):
    d = tmp_path_factory.mktemp("shard")
    write_csv(d / "a.csv", tiny_clip(20, seed=1))
    write_csv(d / "b.csv", tiny_clip(15, seed=2))
    res = pack_motions([d / "a.csv", d / "b.csv"], d / "pack", robot=tiny_robot())
    return res.shards[0]


# ----------------------------------------------------------------------------- defect 2: quaternion order


def test_wxyz_walk_packed_as_xyzw_is_refused_with_the_hint(tmp_path, capsys):
    walk = MOTIONS_DIR / "walk.csv"  # the shipped G1 walk, stored wxyz
    msg = _err(capsys, [str(walk), "--robot", "g1", "--quat-order", "xyzw", "--out", str(tmp_path / "o")])
    assert msg.startswith(f"{walk}:0:4: implausible root orientation with quaternion order xyzw"), msg
    assert "pelvis upside down in 100% of the frames" in msg and "--quat-order wxyz" in msg, msg  # was: packed
    assert not (tmp_path / "o").exists()
    # the same clip written xyzw packs with --quat-order xyzw, equal to the shipped pack's walk. (Read as wxyz
    # it would be upright and turned by 180 degrees: plausible, so that direction cannot be detected.)
    rows = np.loadtxt(walk, delimiter=",")
    rows[:, 3:7] = rows[:, [4, 5, 6, 3]]
    write_csv(tmp_path / "walk_xyzw.csv", rows)
    assert main([str(tmp_path / "walk_xyzw.csv"), "--robot", "g1", "--quat-order", "xyzw", "--out",
                 str(tmp_path / "ok"), "-q"]) == 0
    lib = MotionLib([str(tmp_path / "ok")])
    ref = MotionLib([str(MOTIONS_DIR / "g1_sample")])
    i = ref.motion_id("walk")
    s, n = int(ref.motion_start[i]), int(ref.motion_num_frames[i])
    np.testing.assert_allclose(lib.frames["body_pos_w"].numpy(), ref.frames["body_pos_w"][s:s + n].numpy(),
                               atol=1e-5)


def test_a_clip_in_the_air_is_an_error_unless_allowed(tmp_path, capsys):
    """Floating 1 m above the floor whichever way the quaternion is read: refused (also with ``-q``), and with
    ``--allow-airborne`` packed with a warning."""
    rows = np.loadtxt(MOTIONS_DIR / "walk.csv", delimiter=",")[:30]
    rows[:, 2] += 1.0
    write_csv(tmp_path / "fly.csv", rows)
    msg = _err(capsys, [str(tmp_path / "fly.csv"), "--robot", "g1", "--out", str(tmp_path / "p"), "-q"])
    assert msg.startswith(f"{tmp_path / 'fly.csv'}:1:3: not on the ground") and "--allow-airborne" in msg, msg
    assert not (tmp_path / "p").exists()
    res = pack_motions([tmp_path / "fly.csv"], tmp_path / "p", robot=RobotKinematics.from_robot("g1"),
                       opts=PackOptions(allow_airborne=True))
    assert len(res.warnings) == 1 and "implausible root orientation" in res.warnings[0], res.warnings


def test_a_clip_that_floats_for_longer_than_any_jump_is_packed_with_a_warning(tmp_path):
    """The shipped walk packs without the warning; lifted 10 cm over 2 s of its middle (rows 31-90) it still
    packs, with one warning that names the stretch (a robot cannot push off the air), and as it was read."""
    g1 = RobotKinematics.from_robot("g1")
    rows = np.loadtxt(MOTIONS_DIR / "walk.csv", delimiter=",")[:120]
    write_csv(tmp_path / "walk.csv", rows)
    assert not any("floats" in w for w in pack_motions([tmp_path / "walk.csv"], tmp_path / "a", robot=g1).warnings)
    rows[30:90, 2] += 0.10
    write_csv(tmp_path / "float.csv", rows)
    res = pack_motions([tmp_path / "float.csv"], tmp_path / "b", robot=g1)
    floats = [w for w in res.warnings if "floats" in w]
    assert len(floats) == 1 and floats[0].startswith(f"{tmp_path / 'float.csv'}: no geometry within 0.03 m of the "
                                                     "floor for 2.00 s (rows 31-90"), floats
    lib = MotionLib([str(tmp_path / "b")])
    np.testing.assert_allclose(lib.frames["root_pos"][:, 2].numpy(), rows[:, 2], atol=1e-5)
    res = pack_motions([tmp_path / "float.csv"], tmp_path / "c", robot=g1, opts=PackOptions(max_airborne_s=2.5))
    assert not any("floats" in w for w in res.warnings)
    rows[:20, 2] -= 0.05  # its first frames sunk: a whole-clip --fix-height lifts them and the rest with them
    write_csv(tmp_path / "sunk.csv", rows)
    res = pack_motions([tmp_path / "sunk.csv"], tmp_path / "d", robot=g1, opts=PackOptions(fix_height="all"))
    floats = [w for w in res.warnings if "floats" in w]
    assert len(floats) == 1 and "--fix-height raised the whole clip by 0.05" in floats[0], floats


def test_a_clip_that_starts_in_the_air_is_refused(tmp_path, capsys):
    rows = np.loadtxt(MOTIONS_DIR / "walk.csv", delimiter=",")[:40]
    rows[:5, 2] += 0.5  # the first frames above the floor, the rest on it
    write_csv(tmp_path / "drop.csv", rows)
    msg = _err(capsys, [str(tmp_path / "drop.csv"), "--robot", "g1", "--out", str(tmp_path / "p")])
    assert "not on the ground" in msg and "at the first frame" in msg, msg


# ----------------------------------------------------------------------------- defect 3: simppo-pack


def test_npz_with_fps_zero_is_refused(tmp_path, capsys):
    for fps in (0.0, -5.0, np.nan):
        np.savez(tmp_path / "z.npz", fps=fps, qpos=tiny_clip(10))
        msg = _err(capsys, [str(tmp_path / "z.npz"), "--robot", "tiny", "--out", str(tmp_path / "o")])
        assert msg.startswith(f"{tmp_path / 'z.npz'}:0:0: fps: frame rate {fps:g} is outside [1, 1000] fps"), msg


@pytest.mark.parametrize("scale", [0.2, 3.0])
def test_root_quaternion_far_from_unit_norm_is_refused(tmp_path, capsys, scale):
    rows = tiny_clip(10)
    rows[6, 3:7] *= scale  # file line 7
    write_csv(tmp_path / "q.csv", rows)
    msg = _err(capsys, [str(tmp_path / "q.csv"), "--robot", "tiny", "--out", str(tmp_path / "o")])
    assert msg.startswith(f"{tmp_path / 'q.csv'}:7:4: root quaternion norm {scale:.4f} is not 1"), msg
    rows[6, 3:7] *= 1.01 / scale  # CSV rounding stays accepted (and normalised)
    write_csv(tmp_path / "q.csv", rows)
    assert main([str(tmp_path / "q.csv"), "--robot", "tiny", "--out", str(tmp_path / "ok"), "-q"]) == 0


def test_first_row_with_one_malformed_number_is_reported_not_dropped(tmp_path, capsys):
    rows = [",".join(repr(float(v)) for v in r) for r in tiny_clip(10)]
    toks = rows[0].split(",")
    toks[1] = "0.1.2"
    rows[0] = ",".join(toks)
    (tmp_path / "m.csv").write_text("\n".join(rows) + "\n")
    assert _err(capsys, [str(tmp_path / "m.csv"), "--robot", "tiny", "--out", str(tmp_path / "o")]) == (
        f"{tmp_path / 'm.csv'}:1:2: not a number: '0.1.2'")
    # a real header line is still skipped
    write_csv(tmp_path / "h.csv", tiny_clip(10), header="x,y,z,qw,qx,qy,qz,sh,lh,lk,rh,rk")
    assert main([str(tmp_path / "h.csv"), "--robot", "tiny", "--out", str(tmp_path / "ok"), "-q"]) == 0
    assert int(MotionLib([str(tmp_path / "ok")]).motion_num_frames[0]) == 10


def test_joints_slightly_past_their_limits_are_clamped_with_a_count(tmp_path, capsys):
    rows = tiny_clip(10)
    rows[3, 9] = 2.03  # l_knee (input column 10), range [0, 2]
    rows[5, 9] = 2.01
    write_csv(tmp_path / "j.csv", rows)
    assert main([str(tmp_path / "j.csv"), "--robot", "tiny", "--out", str(tmp_path / "o")]) == 0
    err = capsys.readouterr().err
    assert f"simppo-pack: warning: {tmp_path / 'j.csv'}: 2 joint value(s)" in err, err
    assert "l_knee by 0.0300 rad at row 4" in err, err
    lib = MotionLib([str(tmp_path / "o")])
    knee = lib.joint_names.index("l_knee")
    assert float(lib.frames["dof_pos"][:, knee].max()) <= 2.0


def test_geometry_in_the_floor_is_lifted_with_a_count_or_refused(tmp_path, capsys):
    rk = tiny_robot()
    rows = tiny_clip(20)
    qpos = np.concatenate([rows[:, :7], rows[:, 7:][:, rk.input_to_qpos]], 1)
    low = rk.forward(qpos)["lowest_z"]
    rows[:, 2] -= 0.04 + low  # every frame's lowest point 4 cm into the floor
    write_csv(tmp_path / "g.csv", rows)
    res = pack_motions([tmp_path / "g.csv"], tmp_path / "p", robot=rk)
    assert any("20 frame(s) with geometry up to 0.05 m below the floor were lifted" in w for w in res.warnings)
    lib = MotionLib([str(tmp_path / "p")])
    np.testing.assert_allclose(lib.frames["root_pos"][:, 2].numpy(), rows[:, 2] + 0.04, atol=1e-5)
    rows[:, 2] -= 0.02  # 6 cm: beyond the default ground_tol
    write_csv(tmp_path / "g.csv", rows)
    msg = _err(capsys, [str(tmp_path / "g.csv"), "--robot", "tiny", "--out", str(tmp_path / "o")])
    assert "below the ground" in msg
    res = pack_motions([tmp_path / "g.csv"], tmp_path / "p2", robot=rk, opts=PackOptions(ground_tol=0.1))
    assert any("lifted" in w for w in res.warnings)


# ----------------------------------------------------------------------------- defect 3: shard reader


def test_shard_header_with_fps_zero_is_refused(tiny_shard, tmp_path):
    bad = tmp_path / "fps0.sms"
    rewrite_shard(tiny_shard, bad, lambda d: d["motions"][1].update(fps=0.0))
    with pytest.raises(ShardFormatError, match=r"fps0.sms: motion 1 \(b\): fps must be a number > 0, got 0.0"):
        MotionLib([str(bad)])


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d["fields"]["root_pos"]["shape"].__setitem__(0, 36), r"field root_pos: float32 \[36, 3\]"),
    (lambda d: d["motions"][1].update(num_frames=16), r"field root_pos: float32 \[35, 3\] in the header, expected "
                                                      r"float32 \[36, 3\]"),
    (lambda d: d["fields"]["dof_vel"].update(offset=d["file_size"]), r"field dof_vel: bytes"),
    (lambda d: d["fields"]["body_pos_w"].update(dtype="float64"), r"field body_pos_w: float64"),
    (lambda d: d["fields"]["dof_pos"].update(offset=d["fields"]["root_pos"]["offset"]), r"overlap"),
    (lambda d: d["fields"].pop("contacts"), r"fields \["),
])
def test_shard_fields_are_checked_against_num_frames_and_the_file(tiny_shard, tmp_path, mutate, match):
    bad = tmp_path / "bad.sms"
    rewrite_shard(tiny_shard, bad, mutate)
    with pytest.raises(ShardFormatError, match=match) as e:
        MotionLib([str(bad)])
    assert str(e.value).startswith(f"{bad}: ") and "\n" not in str(e.value)


def test_truncated_shard_is_refused_before_reading(tiny_shard, tmp_path):
    data = tiny_shard.read_bytes()
    for cut in (10, 30, 200, len(data) // 2, len(data) - 1):
        bad = tmp_path / f"cut{cut}.sms"
        bad.write_bytes(data[:cut])
        with pytest.raises(ShardFormatError, match=f"cut{cut}.sms: (too short|truncated)"):
            read_header(bad)


def test_damaged_field_bytes_fail_the_checksum(tiny_shard, tmp_path):
    h = read_header(tiny_shard)
    raw = bytearray(tiny_shard.read_bytes())
    off = h.fields["dof_vel"]["offset"] + 4 * (h.fields["dof_vel"]["shape"][1] * 7 + 2)  # frame 7
    raw[off:off + 4] = np.float32(np.nan).tobytes()
    bad = tmp_path / "nan.sms"
    bad.write_bytes(bytes(raw))
    with pytest.raises(ShardFormatError, match="nan.sms: field dof_vel: checksum mismatch .* the file is damaged"):
        MotionLib([str(bad)])
