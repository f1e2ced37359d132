"""What simppo-pack and MotionLib guarantee about pack contents: every byte checksummed, physically plausible
values only (unit quaternions, bounded speeds and positions, joints in range), bounded frame rates, clips on the
ground, index paths inside the pack."""

import json
import zlib

import numpy as np
import pytest

from simppo.cli.pack import main
from simppo.motion import MotionLib
from simppo.motion.format import ShardFormatError, read_header
from simppo.motion.pack import pack_motions
from simppo.paths import MOTIONS_DIR
from tests.motion.motion_testutil import pack_cli_error, tiny_clip, tiny_robot, use_tiny_robot, write_csv
from tests.motion.test_motion_validation import rewrite_shard


@pytest.fixture(autouse=True)
def _tiny_robot(monkeypatch):
    use_tiny_robot(monkeypatch)


def _err(capsys, args) -> str:
    return pack_cli_error(capsys, args)


@pytest.fixture
def shard(tmp_path):
    write_csv(tmp_path / "a.csv", tiny_clip(20, seed=1))
    write_csv(tmp_path / "b.csv", tiny_clip(15, seed=2))
    return pack_motions([tmp_path / "a.csv", tmp_path / "b.csv"], tmp_path / "pack", robot=tiny_robot()).shards[0]


def craft(src, dst, name: str, change) -> None:
    """``dst``: ``src`` with field ``name`` changed by ``change(array)`` (in place) and its checksum updated,
    as a tool other than simppo-pack (or a deliberate edit) could write it: only the bounds can catch it."""
    h = read_header(src)
    f = h.fields[name]
    raw = bytearray(src.read_bytes())
    a = np.frombuffer(bytes(raw[f["offset"]:f["offset"] + f["nbytes"]]), dtype=f["dtype"]).reshape(f["shape"]).copy()
    change(a)
    raw[f["offset"]:f["offset"] + f["nbytes"]] = a.tobytes()
    tmp = dst.with_suffix(".raw")
    tmp.write_bytes(bytes(raw))
    rewrite_shard(tmp, dst, lambda d: d["fields"][name].update(crc32=zlib.crc32(a.tobytes())))


def _set(idx, value):
    def change(a):
        a[idx] = value
    return change


@pytest.mark.parametrize("name, change, what", [
    ("dof_pos", _set((7, 1), 1e20), "outside its range"),
    ("dof_pos", _set((3, 0), 2.9), "outside its range"),
    ("root_quat", lambda a: a.__imul__(14.0), "a quaternion of norm 14, not a unit quaternion"),
    ("body_quat_w", _set((5, 2, 0), 0.2), "not a unit quaternion"),
    ("root_lin_vel_w", _set((9, 0), 4.8e4), "beyond the physical bound of 50 m/s"),
    ("body_ang_vel_w", _set((2, 1, 2), -900.0), "beyond the physical bound of 200 rad/s"),
    ("dof_vel", _set((7, 2), np.nan), "a non-finite value"),
    ("body_pos_w", _set((1, 0, 0), 3e5), "beyond the physical bound"),
])
def test_implausible_values_behind_a_valid_checksum_are_refused(shard, tmp_path, name, change, what):
    bad = tmp_path / "bad.sms"
    craft(shard, bad, name, change)
    limits = {n: (float(lo), float(hi)) for n, lo, hi in zip(tiny_robot().joint_names, tiny_robot().joint_lower,
                                                              tiny_robot().joint_upper, strict=True)}
    with pytest.raises(ShardFormatError) as e:
        MotionLib([str(bad)], joint_limits=limits)
    msg = str(e.value)
    assert msg.startswith(f"{bad}: field {name}: motion ") and what in msg and "\n" not in msg, msg


def test_random_finite_bytes_in_any_field_are_always_detected(shard, tmp_path):
    """Every corruption of the data region (finite values too: a float32 of 2.7e38 or 1.0001) is a one-line
    error: the field checksum sees any change."""
    h = read_header(shard)
    data = shard.read_bytes()
    rng = np.random.default_rng(7)
    for i in range(60):
        f = h.fields[list(h.fields)[i % len(h.fields)]]
        raw = bytearray(data)
        pos = f["offset"] + int(rng.integers(0, f["nbytes"]))
        old = raw[pos]
        while raw[pos] == old:
            raw[pos] = int(rng.integers(0, 256))
        p = tmp_path / f"c{i}.sms"
        p.write_bytes(bytes(raw))
        with pytest.raises(ShardFormatError, match="checksum mismatch") as e:
            MotionLib([str(p)])
        assert str(e.value).startswith(f"{p}: ") and "\n" not in str(e.value)


def test_verify_reads_a_pack_in_full(shard, tmp_path, capsys):
    assert main(["--verify", str(shard.parent), "--robot", "tiny"]) == 0
    assert "ok:" in capsys.readouterr().out
    last = max(read_header(shard).fields.values(), key=lambda f: f["offset"])
    raw = bytearray(shard.read_bytes())
    raw[last["offset"] + last["nbytes"] - 1] ^= 0xFF
    shard.write_bytes(bytes(raw))
    msg = _err(capsys, ["--verify", str(shard.parent), "--robot", "tiny"])
    assert msg.startswith(f"{shard}: field ") and "checksum mismatch" in msg, msg


def test_the_shipped_pack_verifies():
    assert main(["--verify", str(MOTIONS_DIR / "g1_sample"), "-q"]) == 0


# ----------------------------------------------------------------------------- frame rates and speeds


@pytest.mark.parametrize("args, what", [
    (["--fps", "1e6"], "--fps:0:0: must be in [1, 1000], got 1e+06"),
    (["--fps", "1e-6"], "--fps:0:0: must be in [1, 1000], got 1e-06"),
    (["--target-fps", "1e-6"], "--target-fps:0:0: must be in [1, 1000], got 1e-06"),
    (["--target-fps", "1e5"], "--target-fps:0:0: must be in [1, 1000], got 100000"),
])
def test_absurd_frame_rates_are_refused(tmp_path, capsys, args, what):
    write_csv(tmp_path / "a.csv", tiny_clip(20))
    assert _err(capsys, [str(tmp_path / "a.csv"), "--robot", "tiny", "--out", str(tmp_path / "o"), *args]) == what
    assert not (tmp_path / "o").exists()


def test_target_fps_leaving_one_frame_is_refused(tmp_path, capsys):
    write_csv(tmp_path / "a.csv", tiny_clip(10))  # 0.3 s at 30 fps
    msg = _err(capsys, [str(tmp_path / "a.csv"), "--robot", "tiny", "--out", str(tmp_path / "o"),
                        "--target-fps", "2"])
    assert msg.startswith(f"{tmp_path / 'a.csv'}:0:0: resampled to --target-fps 2") and "at least 2" in msg, msg


def test_a_walk_at_a_wrong_frame_rate_reaches_impossible_speeds(tmp_path, capsys):
    msg = _err(capsys, [str(MOTIONS_DIR / "walk.csv"), "--robot", "g1", "--out", str(tmp_path / "o"),
                        "--fps", "1000"])
    assert "at 1000 fps reaches" in msg and "physical bound" in msg and "--fps" in msg, msg


def test_manifest_and_npz_frame_rates_are_bounded(tmp_path, capsys):
    write_csv(tmp_path / "a.csv", tiny_clip(20))
    (tmp_path / "m.yaml").write_text("motions: [{file: a.csv, fps: 5000}]")
    msg = _err(capsys, [str(tmp_path / "m.yaml"), "--robot", "tiny", "--out", str(tmp_path / "o")])
    assert "manifest entry 1: frame rate 5000 is outside [1, 1000] fps" in msg, msg
    np.savez(tmp_path / "n.npz", fps=1e-6, qpos=tiny_clip(20))
    msg = _err(capsys, [str(tmp_path / "n.npz"), "--robot", "tiny", "--out", str(tmp_path / "o")])
    assert msg == f"{tmp_path / 'n.npz'}:0:0: fps: frame rate 1e-06 is outside [1, 1000] fps", msg


def test_shard_motion_frame_rate_is_bounded_on_load(shard, tmp_path):
    bad = tmp_path / "fps.sms"
    rewrite_shard(shard, bad, lambda d: d["motions"][0].update(fps=1e6))
    with pytest.raises(ShardFormatError, match=r"fps.sms: motion a: frame rate 1e\+06 is outside"):
        MotionLib([str(bad)])


# ----------------------------------------------------------------------------- pack index


@pytest.mark.parametrize("file", ["../outside.sms", "/etc/passwd", "sub/../../x.sms", ""])
def test_index_naming_a_shard_outside_the_pack_is_refused(shard, tmp_path, file):
    index = shard.parent / "index.json"
    d = json.loads(index.read_text())
    d["shards"][0]["file"] = file
    index.write_text(json.dumps(d))
    with pytest.raises(ShardFormatError, match="is outside the pack's folder") as e:
        MotionLib([str(shard.parent)])
    assert str(e.value).startswith(f"{index}: ")
