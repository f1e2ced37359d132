"""simppo-pack never loses what is on disk: ``--force`` replaces only a pack (never inputs or foreign files),
``--out`` naming a file or ``.`` gets one clear line, and SIGTERM (``timeout``, SLURM) leaves nothing behind."""

import os
import signal
import subprocess
import sys
import time

import pytest

from simppo.cli.pack import main
from simppo.paths import MOTIONS_DIR
from tests.motion.motion_testutil import pack_cli_error, tiny_clip, use_tiny_robot, write_csv


@pytest.fixture(autouse=True)
def _tiny_robot(monkeypatch):
    use_tiny_robot(monkeypatch)


def _err(capsys, args) -> str:
    return pack_cli_error(capsys, args)


def _clips(d, n=2):
    d.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        write_csv(d / f"c{i}.csv", tiny_clip(12, seed=i))
    return d


def _snapshot(d):
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_force_never_deletes_the_inputs(tmp_path, capsys):
    d = _clips(tmp_path / "mydir")
    (d / "notes.txt").write_text("mine")
    before = _snapshot(d)
    msg = _err(capsys, [str(d), "--robot", "tiny", "--out", str(d), "--force"])
    assert msg.startswith(f"{d}:0:0: --force would delete the input"), msg
    assert _snapshot(d) == before
    # the inputs in a sub-folder of --out
    sub = _clips(tmp_path / "outer" / "clips")
    before = _snapshot(tmp_path / "outer")
    msg = _err(capsys, [str(sub), "--robot", "tiny", "--out", str(tmp_path / "outer"), "--force"])
    assert "--force would delete the input" in msg, msg
    assert _snapshot(tmp_path / "outer") == before
    # without --force the same advice is not given
    msg = _err(capsys, [str(d), "--robot", "tiny", "--out", str(d)])
    assert "--force would delete the input" in msg and "pass --force" not in msg, msg


def test_force_replaces_only_a_pack(tmp_path, capsys):
    src = _clips(tmp_path / "src")
    other = tmp_path / "other"
    other.mkdir()
    (other / "thesis.tex").write_text("years of work")
    msg = _err(capsys, [str(src), "--robot", "tiny", "--out", str(other), "--force"])
    assert "is not a simppo motion pack" in msg, msg
    assert (other / "thesis.tex").read_text() == "years of work"
    # a pack is replaced; a pack with a foreign file beside it is not
    pack = tmp_path / "pack"
    assert main([str(src / "c0.csv"), "--robot", "tiny", "--out", str(pack), "-q"]) == 0
    assert main([str(src), "--robot", "tiny", "--out", str(pack), "--force", "-q"]) == 0
    assert "2 motions" not in capsys.readouterr().out
    (pack / "README.md").write_text("my notes")
    msg = _err(capsys, [str(src), "--robot", "tiny", "--out", str(pack), "--force"])
    assert "holds 'README.md', which is not part of the pack" in msg, msg
    assert (pack / "README.md").read_text() == "my notes"
    # an empty directory holds nothing to lose
    (tmp_path / "empty").mkdir()
    assert main([str(src), "--robot", "tiny", "--out", str(tmp_path / "empty"), "--force", "-q"]) == 0


def test_out_naming_a_file_or_the_current_directory(tmp_path, capsys, monkeypatch):
    src = _clips(tmp_path / "src")
    f = tmp_path / "file.txt"
    f.write_text("keep")
    for extra in ([], ["--force"]):
        msg = _err(capsys, [str(src), "--robot", "tiny", "--out", str(f), *extra])
        assert msg == f"{f}:0:0: exists and is not a directory; choose another --out (a pack is a directory)", msg
    under = f / "sub" / "pack"  # a folder under the file: the file is named, not "File exists"
    msg = _err(capsys, [str(src), "--robot", "tiny", "--out", str(under)])
    assert msg == f"{f}: is a file, so the folder {under} cannot be made there", msg
    assert f.read_text() == "keep"
    # --out . inside a pack: replaced like any pack (no "Device or resource busy")
    pack = tmp_path / "pack"
    assert main([str(src), "--robot", "tiny", "--out", str(pack), "-q"]) == 0
    monkeypatch.chdir(pack)
    assert main([str(src / "c0.csv"), "--robot", "tiny", "--out", ".", "--force", "-q"]) == 0
    assert sorted(os.listdir(pack)) == ["index.json", "shard_00000.sms"]
    # --out . in the inputs' folder: refused, nothing lost
    monkeypatch.chdir(src)
    msg = _err(capsys, [".", "--robot", "tiny", "--out", ".", "--force"])
    assert "--force would delete the input" in msg, msg
    assert sorted(os.listdir(src)) == ["c0.csv", "c1.csv"]


def test_sigterm_during_a_pack_leaves_nothing(tmp_path):
    """A real ``simppo-pack`` process (the G1, so that packing takes long enough) gets SIGTERM mid-way."""
    src = tmp_path / "src"
    src.mkdir()
    for i in range(400):
        os.link(MOTIONS_DIR / "walk.csv", src / f"walk{i:03d}.csv")
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "simppo.cli.pack", str(src), "--robot", "g1", "--out",
                             str(out)], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(p.name.startswith(".out.tmp-") for p in tmp_path.iterdir()):
        time.sleep(0.02)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "terminated (SIGTERM); nothing written" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]
