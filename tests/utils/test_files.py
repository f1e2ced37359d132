import os

import pytest

from simppo.utils.files import atomic_write, atomic_write_bytes, atomic_write_text


def test_atomic_write_replaces_whole_file(tmp_path):
    p = tmp_path / "a.txt"
    atomic_write_text(p, "old")
    assert atomic_write_bytes(p, b"new contents") == p
    assert p.read_bytes() == b"new contents"
    umask = os.umask(0)
    os.umask(umask)
    assert p.stat().st_mode & 0o777 == 0o666 & ~umask
    assert sorted(x.name for x in tmp_path.iterdir()) == ["a.txt"]


def test_failed_write_keeps_old_file_and_removes_temp(tmp_path):
    p = tmp_path / "a.bin"
    atomic_write_bytes(p, b"good")

    def explode(f):
        f.write(b"partial")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(p, explode)
    assert p.read_bytes() == b"good"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["a.bin"]
