"""simppo-pack validation errors (file:row:col), --force, atomic output, and its start-up."""

import os

import numpy as np
import pytest

import simppo.motion.format as fmt
from simppo.cli.pack import main
from simppo.motion import MotionLib
from simppo.motion import pack as pack_mod
from simppo.paths import MOTIONS_DIR
from tests.helpers import run_fresh_python
from tests.motion.motion_testutil import tiny_clip, tiny_robot, write_csv


@pytest.fixture(autouse=True)
def _tiny_robot(monkeypatch):
    """The CLI builds its robot from --robot; route 'tiny' to the test model (g1 stays real)."""
    real = pack_mod.RobotKinematics.from_robot
    monkeypatch.setattr(
        pack_mod.RobotKinematics,
        "from_robot",
        classmethod(lambda cls, name: tiny_robot() if name == "tiny" else real(name)),
    )


def _err(capsys, args):
    rc = main(args)
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert err.startswith("simppo-pack: error: ") and "\n" not in err, err
    return err[len("simppo-pack: error: ") :]


def _clean(tmp_path):
    """Nothing but the test's own inputs: no output dir, no temp leftovers."""
    return sorted(p.name for p in tmp_path.iterdir())


def test_bad_inputs_each_give_their_error(tmp_path, capsys):
    good = tiny_clip(10)
    out = str(tmp_path / "out")
    base = ["--robot", "tiny", "--out", out]

    rows = [",".join(map(str, r)) for r in good]
    rows[3] = ",".join(map(str, good[3][:-1]))  # 11 columns on file line 4
    (tmp_path / "cols.csv").write_text("\n".join(rows) + "\n")
    assert (
        _err(capsys, [str(tmp_path / "cols.csv"), *base])
        == f"{tmp_path / 'cols.csv'}:4:12: expected 12 columns for this robot, got 11"
    )

    bad = good.copy()
    bad[5, 9] = np.nan
    write_csv(tmp_path / "nan.csv", bad, header="h" * 5)  # header line → data row 6 is file line 7
    assert _err(capsys, [str(tmp_path / "nan.csv"), *base]).startswith(f"{tmp_path / 'nan.csv'}:7:10: non-finite")

    bad = good.copy()
    bad[2, 1] = np.inf
    np.savez(tmp_path / "inf.npz", fps=30.0, qpos=bad)
    assert _err(capsys, [str(tmp_path / "inf.npz"), *base]).startswith(f"{tmp_path / 'inf.npz'}:3:2: non-finite")

    bad = good.copy()
    bad[6, 3:7] = 0.0
    write_csv(tmp_path / "zq.csv", bad)
    assert _err(capsys, [str(tmp_path / "zq.csv"), *base]) == f"{tmp_path / 'zq.csv'}:7:4: zero-norm root quaternion"

    bad = good.copy()
    bad[8, 9] = 2.3  # l_knee (input column 10), range [0, 2]
    write_csv(tmp_path / "lim.csv", bad)
    msg = _err(capsys, [str(tmp_path / "lim.csv"), *base])
    assert msg.startswith(f"{tmp_path / 'lim.csv'}:9:10: joint l_knee = 2.3000 is outside its range"), msg
    bad[8, 9] = 2.03  # within the default tolerance: accepted
    write_csv(tmp_path / "lim_ok.csv", bad)
    assert main([str(tmp_path / "lim_ok.csv"), "--robot", "tiny", "--out", str(tmp_path / "ok"), "-q"]) == 0

    bad = good.copy()
    bad[4:, 2] = 0.1  # pelvis sunk into the floor from row 5 on
    write_csv(tmp_path / "low.csv", bad)
    msg = _err(capsys, [str(tmp_path / "low.csv"), *base])
    assert msg.startswith(f"{tmp_path / 'low.csv'}:5:1: body ") and "below the ground" in msg
    assert "--quat-order" in msg

    (tmp_path / "empty.csv").write_text("")
    assert (
        _err(capsys, [str(tmp_path / "empty.csv"), *base]) == f"{tmp_path / 'empty.csv'}:0:0: empty clip: no data rows"
    )
    write_csv(tmp_path / "one.csv", good[:1])
    assert "empty clip" in _err(capsys, [str(tmp_path / "one.csv"), *base])
    np.savez(tmp_path / "e.npz", fps=30.0, qpos=np.zeros((0, 12)))
    assert "empty clip" in _err(capsys, [str(tmp_path / "e.npz"), *base])

    sub = tmp_path / "sub"
    sub.mkdir()
    write_csv(sub / "walk.csv", good)
    write_csv(tmp_path / "walk.csv", good)
    msg = _err(capsys, [str(tmp_path / "walk.csv"), str(sub), *base])
    assert msg.startswith(f"{sub / 'walk.csv'}:0:0: duplicate motion name 'walk'"), msg
    (tmp_path / "dup.yaml").write_text("motions:\n  - {file: walk.csv}\n  - {file: sub/walk.csv, weight: 2}\n")
    assert _err(capsys, [str(tmp_path / "dup.yaml"), *base]).startswith(f"{tmp_path / 'dup.yaml'}:2:0: duplicate")
    assert not (tmp_path / "out").exists()
    assert not [p for p in _clean(tmp_path) if p.startswith(".")]


def test_quat_order_and_manifest(tmp_path, capsys):
    rows = tiny_clip(12, seed=5)
    xyzw = rows.copy()
    xyzw[:, 3:7] = rows[:, [4, 5, 6, 3]]
    write_csv(tmp_path / "x.csv", xyzw)
    write_csv(tmp_path / "w.csv", rows)
    (tmp_path / "m.yaml").write_text(
        "fps: 60\nmotions:\n  - {file: x.csv, quat_order: xyzw, weight: 2.5}\n  - {file: w.csv, name: ww}\n"
    )
    assert main([str(tmp_path / "m.yaml"), "--robot", "tiny", "--out", str(tmp_path / "o"), "-q"]) == 0
    lib = MotionLib([str(tmp_path / "o")])
    assert lib.motion_names == ["x", "ww"] and lib.motion_fps == [60.0, 60.0]
    np.testing.assert_allclose(lib.motion_weights.numpy(), [2.5 / 3.5, 1 / 3.5], rtol=1e-6)
    a, b = lib.frames["root_quat"][:12].numpy(), lib.frames["root_quat"][12:].numpy()
    np.testing.assert_allclose(np.abs(np.sum(a * b, -1)), 1.0, atol=1e-6)
    (tmp_path / "bad.yaml").write_text("motions:\n  - {file: w.csv, weight: -1}\n")
    assert (
        _err(capsys, [str(tmp_path / "bad.yaml"), "--robot", "tiny", "--out", str(tmp_path / "o2")])
        == f"{tmp_path / 'bad.yaml'}:1:0: manifest entry 1: weight must be > 0, got -1.0"
    )


def test_force_required_and_replaces_only_when_complete(tmp_path, capsys):
    write_csv(tmp_path / "a.csv", tiny_clip(10, seed=1))
    write_csv(tmp_path / "b.csv", tiny_clip(10, seed=2))
    out = tmp_path / "out"
    assert main([str(tmp_path / "a.csv"), "--robot", "tiny", "--out", str(out), "-q"]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert (
        _err(capsys, [str(tmp_path / "b.csv"), "--robot", "tiny", "--out", str(out)])
        == f"{out}:0:0: output directory exists; pass --force to replace it"
    )
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert main([str(tmp_path / "b.csv"), "--robot", "tiny", "--out", str(out), "--force", "-q"]) == 0
    assert MotionLib([str(out)]).motion_names == ["b"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "b.csv", "out"]


@pytest.mark.parametrize("exc", [RuntimeError("disk full"), KeyboardInterrupt()])
def test_interrupted_pack_leaves_nothing(tmp_path, monkeypatch, capsys, exc):
    for i in range(3):
        write_csv(tmp_path / f"c{i}.csv", tiny_clip(10, seed=i))
    inputs = [str(tmp_path / f"c{i}.csv") for i in range(3)]
    out = tmp_path / "out"
    real = fmt._write_field
    calls = {"n": 0}

    def flaky(fh, header, name, arr):
        calls["n"] += 1
        if calls["n"] == 15:  # mid-way through the second shard
            raise exc
        return real(fh, header, name, arr)

    monkeypatch.setattr(fmt, "_write_field", flaky)
    with pytest.raises(type(exc)):
        pack_mod.pack_motions(inputs, out, robot=tiny_robot(), opts=pack_mod.PackOptions(max_motions_per_shard=2))
    assert sorted(os.listdir(tmp_path)) == ["c0.csv", "c1.csv", "c2.csv"]
    # with --force an existing pack survives a failed replacement untouched
    monkeypatch.setattr(fmt, "_write_field", real)
    pack_mod.pack_motions(inputs[:1], out, robot=tiny_robot())
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    calls["n"] = 0
    monkeypatch.setattr(fmt, "_write_field", flaky)
    with pytest.raises(type(exc)):
        pack_mod.pack_motions(
            inputs, out, robot=tiny_robot(), force=True, opts=pack_mod.PackOptions(max_motions_per_shard=2)
        )
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(os.listdir(tmp_path)) == ["c0.csv", "c1.csv", "c2.csv", "out"]


def test_packing_never_imports_torch_or_warp(tmp_path):
    """simppo-pack (and each of its worker processes) starts without torch and Warp; MotionLib loads on demand."""
    clip = tmp_path / "squat.csv"
    clip.write_text((MOTIONS_DIR / "squat.csv").read_text())
    code = f"""
import sys
from simppo.cli.pack import main
assert main([{str(clip)!r}, "--robot", "g1", "--out", {str(tmp_path / "pack")!r}, "--workers", "1"]) == 0
assert "torch" not in sys.modules and "warp" not in sys.modules, "imported while packing"
from simppo.motion import MotionLib
assert "torch" in sys.modules and MotionLib([{str(tmp_path / "pack")!r}]).num_motions == 1
"""
    run_fresh_python(code)
