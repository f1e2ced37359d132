"""Fuzzing the motion readers (issue 13): random bytes, truncated CSV / NPZ / shards, wrong dtypes and
huge dimensions give a one-line error naming the file; never a traceback. Sizes announced by a file are
checked against the file before anything is allocated (a reader that trusted them would raise
MemoryError, or exhaust the memory, on the "huge" cases). No reader unpickles (``allow_pickle=False``,
``yaml.safe_load``, ``torch.load(weights_only=True)``)."""

import io
import json
import re
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest

import simppo
from simppo.cli.pack import main
from simppo.motion import MotionIndex, MotionLib
from simppo.motion import pack as pack_mod
from simppo.motion.format import ShardFormatError, read_header
from simppo.motion.pack import pack_motions
from tests.motion.motion_testutil import tiny_clip, tiny_robot, write_csv
from tests.motion.test_motion_validation import rewrite_shard

SEEDS = range(12)


@pytest.fixture(autouse=True)
def _tiny_robot(monkeypatch):
    real = pack_mod.RobotKinematics.from_robot
    monkeypatch.setattr(pack_mod.RobotKinematics, "from_robot",
                        classmethod(lambda cls, name: tiny_robot() if name == "tiny" else real(name)))


def pack_cli_outcome(capsys, path: Path, out: Path, *extra) -> int:
    """simppo-pack on ``path``: success, or exit 2 with one stderr line naming the file. Any exception fails."""
    rc = main([str(path), "--robot", "tiny", "--out", str(out), "--force", "-q", *extra])
    err = capsys.readouterr().err.strip()
    if rc == 0:
        return rc
    assert rc == 2, err
    assert err.startswith("simppo-pack: error: ") and "\n" not in err, err
    assert str(path) in err, err
    return rc


def one_line_shard_error(path: Path | str, fn) -> None:
    """``fn()`` raises a one-line :class:`ShardFormatError` naming ``path`` (or a file name)."""
    with pytest.raises(ShardFormatError) as e:
        fn()
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg, msg


# ----------------------------------------------------------------------------- simppo-pack inputs


@pytest.mark.parametrize("suffix", [".csv", ".npz", ".yaml"])
def test_random_bytes_and_random_text_inputs(tmp_path, capsys, suffix):
    rng = np.random.default_rng(1)
    for seed in SEEDS:
        p = tmp_path / f"r{seed}{suffix}"
        n = int(rng.integers(0, 3000))
        if seed % 2:
            p.write_bytes(rng.integers(0, 256, n, dtype=np.uint8).tobytes())
        else:  # text made of the characters a clip is made of
            p.write_text("".join(rng.choice(list("0123456789.,-e\n \tnaif:[]{}"), n)))
        assert pack_cli_outcome(capsys, p, tmp_path / "o") == 2


def test_truncated_csv_and_npz(tmp_path, capsys):
    rows = tiny_clip(12)
    write_csv(tmp_path / "c.csv", rows)
    np.savez(tmp_path / "n.npz", fps=30.0, qpos=rows)
    np.savez_compressed(tmp_path / "z.npz", fps=30.0, qpos=rows)
    rng = np.random.default_rng(2)
    for name in ("c.csv", "n.npz", "z.npz"):
        data = (tmp_path / name).read_bytes()
        for cut in sorted({0, 1, len(data) - 1, *rng.integers(0, len(data), 14).tolist()}):
            p = tmp_path / f"cut{cut}_{name}"
            p.write_bytes(data[:cut])
            rc = pack_cli_outcome(capsys, p, tmp_path / "o")
            assert rc == 2 or name == "c.csv", (name, cut)  # a CSV cut after a row is a shorter, valid clip


@pytest.mark.parametrize("qpos, what", [
    (np.array([["a"] * 12] * 4), "dtype <U1 is not a plain number type"),
    (tiny_clip(4).astype(np.complex64), "dtype complex64 is not a plain number type"),
    (np.zeros(4, dtype=[("a", "f4"), ("b", "f4")]), "is not a plain number type"),
    (np.array(["2020-01-01"] * 4, dtype="datetime64[D]"), "datetime64[D] is not a plain number type"),
    (np.zeros((4, 3, 12)), "3-D array (4, 3, 12), expected at most 2-D"),
    (np.zeros((4, 13)), "expected 12 columns for this robot, got 13"),
    (np.zeros((4,)), "qpos must be 2-D"),
])
def test_npz_with_wrong_dtypes_or_shapes(tmp_path, capsys, qpos, what):
    p = tmp_path / "w.npz"
    np.savez(p, fps=30.0, qpos=qpos)
    rc = main([str(p), "--robot", "tiny", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith(f"simppo-pack: error: {p}:") and "\n" not in err, err
    assert what in err, err


def test_npz_object_arrays_are_never_unpickled(tmp_path, capsys):
    p = tmp_path / "obj.npz"
    np.savez(p, fps=30.0, qpos=np.array([object()] * 3, dtype=object))  # a pickled member
    assert main([str(p), "--robot", "tiny", "--out", str(tmp_path / "o")]) == 2
    assert "dtype object is not a plain number type" in capsys.readouterr().err
    np.savez(tmp_path / "fps.npz", fps=np.array(["thirty"]), qpos=tiny_clip(5))
    assert main([str(tmp_path / "fps.npz"), "--robot", "tiny", "--out", str(tmp_path / "o")]) == 2
    assert "fps.npz:0:0: fps: dtype <U6 is not a plain number type" in capsys.readouterr().err
    np.savez(tmp_path / "fps2.npz", fps=np.array([30.0, 60.0]), qpos=tiny_clip(5))
    assert main([str(tmp_path / "fps2.npz"), "--robot", "tiny", "--out", str(tmp_path / "o")]) == 2
    assert "fps must be one number" in capsys.readouterr().err


def _npz_claiming(path: Path, shape, dtype="<f8", payload: bytes = b"\0" * 64) -> None:
    """An NPZ whose ``qpos.npy`` header announces ``shape`` while holding only ``payload``."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": dtype, "fortran_order": False, "shape": shape})
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("qpos.npy", buf.getvalue() + payload)


@pytest.mark.parametrize("shape", [(10**9, 12), (2**40, 2**40), (3, 10**12), (10**6, 12)])
def test_npz_announcing_huge_dimensions(tmp_path, capsys, shape):
    p = tmp_path / "huge.npz"
    _npz_claiming(p, shape)
    assert pack_cli_outcome(capsys, p, tmp_path / "o") == 2


def test_csv_with_huge_rows_or_many_columns(tmp_path, capsys):
    (tmp_path / "wide.csv").write_text(",".join(["1"] * 200000) + "\n")
    assert pack_cli_outcome(capsys, tmp_path / "wide.csv", tmp_path / "o") == 2
    (tmp_path / "big.csv").write_text("1e308" + "0" * 400 + ",1" * 11 + "\n")
    assert pack_cli_outcome(capsys, tmp_path / "big.csv", tmp_path / "o") == 2


def test_manifests_with_wrong_types(tmp_path, capsys):
    write_csv(tmp_path / "a.csv", tiny_clip(5))
    for i, text in enumerate([
        "motions: 3", "motions: [[a.csv]]", "motions: [{file: [a.csv]}]", "motions: [{file: a.csv, fps: [1]}]",
        "motions: [{file: a.csv, weight: .nan}]", "!!python/object/apply:os.system ['echo pwned']",
        "motions: [{file: a.csv, quat_order: {a: 1}}]", "- &a [*a]",
    ]):
        p = tmp_path / f"m{i}.yaml"
        p.write_text(text)
        assert pack_cli_outcome(capsys, p, tmp_path / "o") == 2, text


# ----------------------------------------------------------------------------- shards and packs


@pytest.fixture(scope="module")
def shard_bytes(tmp_path_factory):
    d = tmp_path_factory.mktemp("fz")
    write_csv(d / "a.csv", tiny_clip(20, seed=1))
    write_csv(d / "b.csv", tiny_clip(15, seed=2))
    res = pack_motions([d / "a.csv", d / "b.csv"], d / "pack", robot=tiny_robot())
    return res.shards[0].read_bytes()


def test_random_and_truncated_shards(tmp_path, shard_bytes):
    rng = np.random.default_rng(3)
    n = len(shard_bytes)
    cases = [rng.integers(0, 256, int(rng.integers(0, 4000)), dtype=np.uint8).tobytes() for _ in SEEDS]
    cases += [shard_bytes[:c] for c in sorted({0, 23, 24, 25, n - 1, *rng.integers(0, n, 20).tolist()})]
    cases += [b"SIMPPOMS" + rng.integers(0, 256, 300, dtype=np.uint8).tobytes()]
    for i, data in enumerate(cases):
        p = tmp_path / f"s{i}.sms"
        p.write_bytes(data)
        one_line_shard_error(p, lambda p=p: MotionLib([str(p)]))
        one_line_shard_error(p, lambda p=p: MotionIndex.from_sources([p]))


def test_flipped_bytes_in_a_shard_header(tmp_path, shard_bytes):
    """Any single-byte change of the header, even a harmless-looking one inside a motion name, is an error
    naming the file (the header's CRC-32 in the preamble)."""
    hlen = struct.unpack("<Q", shard_bytes[16:24])[0]
    rng = np.random.default_rng(4)
    for i in range(40):
        data = bytearray(shard_bytes)
        pos = 24 + int(rng.integers(0, hlen))
        data[pos] = (data[pos] + int(rng.integers(1, 256))) % 256  # always a different byte
        p = tmp_path / f"f{i}.sms"
        p.write_bytes(bytes(data))
        one_line_shard_error(p, lambda p=p: MotionLib([str(p)]))


def test_corrupted_data_of_a_shard_is_always_detected(tmp_path, shard_bytes):
    """Random changes anywhere in the arrays, finite values included (a float32 of 2.7e38, 1e20 or the same
    number one ulp off): each load is a one-line error naming the file."""
    h = read_header_bytes(tmp_path, shard_bytes)
    rng = np.random.default_rng(5)
    for i in range(40):
        f = h.fields[list(h.fields)[i % len(h.fields)]]
        data = bytearray(shard_bytes)
        n = 4 if f["dtype"] == "float32" else 1
        pos = f["offset"] + int(rng.integers(0, f["nbytes"] // n)) * n
        old = np.frombuffer(bytes(data[pos:pos + 4]), np.float32)[0]
        new = [np.float32(2.7e38), np.float32(1e20), np.nextafter(old, np.float32(np.inf))][i % 3]
        data[pos:pos + n] = np.float32(new).tobytes()[:n] if n == 4 else bytes([(data[pos] + 1) % 256])
        p = tmp_path / f"d{i}.sms"
        p.write_bytes(bytes(data))
        one_line_shard_error(p, lambda p=p: MotionLib([str(p)]))


def read_header_bytes(tmp_path, data: bytes):
    p = tmp_path / "h.sms"
    p.write_bytes(data)
    return read_header(p)


@pytest.mark.parametrize("mutate", [
    lambda d: d.update(motions=[{**d["motions"][0], "num_frames": 10**15}]),
    lambda d: d.update(motions=[{**m, "fps": "30"} for m in d["motions"]]),
    lambda d: d.update(motions=[{**m, "start": 1} for m in d["motions"]]),
    lambda d: d.update(motions=[]),
    lambda d: d.update(joint_names=[1, 2]),
    lambda d: d.update(fields={k: {**f, "shape": [10**12, 3]} for k, f in d["fields"].items()}),
    lambda d: d.update(fields={k: {**f, "offset": -64} for k, f in d["fields"].items()}),
    lambda d: d.update(fields={k: {**f, "dtype": "object"} for k, f in d["fields"].items()}),
    lambda d: d.update(file_size=10**18),
    lambda d: d.update(fields=[]),
    lambda d: d.update(version="1"),
    lambda d: d.update(format="other"),
])
def test_shard_headers_with_wrong_types_and_huge_dimensions(tmp_path, shard_bytes, mutate):
    src = tmp_path / "src.sms"
    src.write_bytes(shard_bytes)
    p = tmp_path / "m.sms"
    rewrite_shard(src, p, mutate)
    one_line_shard_error(p, lambda: MotionLib([str(p)]))


def test_shard_header_length_and_nesting(tmp_path, shard_bytes):
    p = tmp_path / "hlen.sms"
    p.write_bytes(shard_bytes[:16] + struct.pack("<Q", 2**62) + shard_bytes[24:])
    one_line_shard_error(p, lambda: read_header(p))
    deep = b"[" * 100000 + b"]" * 100000
    p2 = tmp_path / "deep.sms"
    p2.write_bytes(shard_bytes[:16] + struct.pack("<Q", len(deep)) + deep)
    one_line_shard_error(p2, lambda: read_header(p2))


def test_corrupt_pack_index(tmp_path):
    for i, text in enumerate(["{", "[]", '{"format": "simppo-motion-pack"}', '{"format": "simppo-motion-pack", '
                              '"shards": [{"file": 3}]}', '{"format": "simppo-motion-pack", "shards": "x"}']):
        d = tmp_path / f"p{i}"
        d.mkdir()
        (d / "index.json").write_text(text)
        one_line_shard_error(d / "index.json", lambda d=d: MotionLib([str(d)]))
    d = tmp_path / "bin"
    d.mkdir()
    (d / "index.json").write_bytes(b"\xff\xfe\x00garbage")
    one_line_shard_error(d / "index.json", lambda: MotionLib([str(d)]))
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok" / "index.json").write_text(json.dumps({"format": "simppo-motion-pack",
                                                            "shards": [{"file": "missing.sms"}]}))
    one_line_shard_error("missing.sms: no such shard file", lambda: MotionLib([str(tmp_path / "ok")]))


# ----------------------------------------------------------------------------- no pickle, anywhere


RESTRICTED_UNPICKLER = "simppo/motion/torch_archive.py"


def test_no_reader_unpickles():
    """Every loader in simppo is pickle-free: ``np.load(..., allow_pickle=False)``, ``yaml.safe_load``,
    ``torch.load(..., weights_only=True)``; no ``pickle`` import but in the torch-archive reader, whose unpickler
    resolves every name itself (``find_class`` never reaches pickle's own, nor an import)."""
    pkg = Path(simppo.__file__).parent
    files = sorted(pkg.rglob("*.py"))
    for extra in ("tools", "benchmarks"):  # the repository's scripts, when running from a checkout
        files += sorted((pkg.parent / extra).rglob("*.py"))
    problems = []
    for f in files:
        src = f.read_text()
        for m in re.finditer(r"\b(np|numpy)\.load\((?P<args>[^)]*)\)", src):
            if "allow_pickle=False" not in m["args"]:
                problems.append(f"{f}: {m[0]}")
        for m in re.finditer(r"\btorch\.load\((?P<args>[^)]*)\)", src):
            if "weights_only=True" not in m["args"]:
                problems.append(f"{f}: {m[0]}")
        problems += [f"{f}: {m[0]}" for m in re.finditer(r"\byaml\.(load|unsafe_load|full_load)\(", src)]
        if f.relative_to(pkg.parent).as_posix() == RESTRICTED_UNPICKLER:
            assert "def find_class" in src and not re.search(r"super\(\)\.find_class|import_module|__import__", src)
        else:
            problems += [f"{f}: {m[0]}" for m in re.finditer(r"^\s*(import|from)\s+(c?pickle|dill|joblib)\b", src,
                                                              re.M)]
        problems += [f"{f}: {m[0]}" for m in re.finditer(r"allow_pickle\s*=\s*True|weights_only\s*=\s*False", src)]
    assert not problems, problems
