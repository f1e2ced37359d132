"""The torch-archive reader builds tensors, numpy arrays and plain types only, and runs nothing a file names."""

from __future__ import annotations

import io
import pickletools
import sys
import zipfile

import numpy as np
import pytest
import torch

from simppo.motion.torch_archive import Opaque, TorchArchiveError, load_torch_archive, opaque_entries


def write_archive(path, pkl: bytes, storages: dict[str, bytes] | None = None) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", pkl)
        zf.writestr("archive/byteorder", "little")
        for key, data in (storages or {}).items():
            zf.writestr(f"archive/data/{key}", data)


def test_tensors_arrays_and_plain_types_match_torch_load(tmp_path):
    g = torch.Generator().manual_seed(0)
    d = {"fps": 30, "name": "walk", "view": torch.randn(6, 36, generator=g)[:, 7:],
         "transposed": torch.randn(4, 33, 3, generator=g).transpose(0, 1), "flags": torch.rand(5, generator=g) > 0.5,
         "half": torch.randn(7, generator=g).half(), "bf16": torch.randn(7, generator=g).bfloat16(),
         "ints": torch.arange(10)[::3], "empty": torch.zeros(0, 29), "array": np.arange(12.0).reshape(3, 4).T,
         "scalar": np.float64(50.0), "nested": {"list": [torch.ones(2), (1, 2.5)]}}
    torch.save(d, tmp_path / "a.motion")
    got = load_torch_archive(tmp_path / "a.motion")
    want = torch.load(tmp_path / "a.motion", weights_only=False)
    for key in ("view", "transposed", "flags", "half", "ints", "empty"):
        assert isinstance(got[key], np.ndarray) and got[key].shape == tuple(want[key].shape), key
        np.testing.assert_array_equal(got[key], want[key].numpy(), err_msg=key)
    np.testing.assert_array_equal(got["bf16"], want["bf16"].float().numpy())
    np.testing.assert_array_equal(got["array"], d["array"])
    assert got["scalar"] == 50.0 and got["fps"] == 30 and got["name"] == "walk"
    np.testing.assert_array_equal(got["nested"]["list"][0], np.ones(2))
    assert got["nested"]["list"][1] == (1, 2.5)
    assert opaque_entries(got) == {}


def test_nothing_named_in_a_file_is_imported_or_called(tmp_path):
    marker = tmp_path / "ran"
    # os.system("touch <marker>"), a module nobody imported, and a class of a module that does not exist
    command = f"touch {marker}".encode()
    pkl = (b"\x80\x02}q\x00(X\x04\x00\x00\x00evilq\x01cos\nsystem\nq\x02X" + len(command).to_bytes(4, "little")
           + command + b"\x85R"
           + b"X\x06\x00\x00\x00importcantigravity\nfly\n)R"
           + b"X\x05\x00\x00\x00stateccustom_pkg.conversion\nStateConversion\n)\x81}X\x01\x00\x00\x00aK\x01sb"
           + b"X\x03\x00\x00\x00fpsK\x1eu.")
    pickletools.dis(pkl, out=io.StringIO())  # a well-formed protocol-2 pickle, as torch archives are
    write_archive(tmp_path / "evil.motion", pkl)
    got = load_torch_archive(tmp_path / "evil.motion")
    assert not marker.exists()
    assert "antigravity" not in sys.modules and "custom_pkg" not in sys.modules
    assert got["fps"] == 30 and all(isinstance(got[k], Opaque) for k in ("evil", "import", "state"))
    assert opaque_entries(got) == {"evil": "os.system", "import": "antigravity.fly",
                                   "state": "custom_pkg.conversion.StateConversion"}


@pytest.mark.parametrize("case, message", [
    ("storage_short", "needs 40 bytes, the archive holds 8"),
    ("view_outside", "reaches element"),
    ("missing_storage", "storage 0 is missing"),
    ("no_pickle", "no single <name>/data.pkl"),
    ("garbage_pickle", "unreadable pickle"),
    ("not_zip", "not a torch zip archive"),
])
def test_malformed_archives_are_refused_in_one_line(tmp_path, case, message):
    path = tmp_path / f"{case}.motion"

    def tensor_pickle(size: int, offset: int = 0) -> bytes:
        return (b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storagectorch\nFloatStorage\n"
                b"X\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x0atQ" + bytes([0x4B, offset]) + bytes([0x4B, size])
                + b"\x85K\x01\x85\x89}tR.")
    if case == "storage_short":
        write_archive(path, tensor_pickle(10), {"0": b"\0" * 8})
    elif case == "view_outside":
        write_archive(path, tensor_pickle(8, offset=5), {"0": b"\0" * 40})
    elif case == "missing_storage":
        write_archive(path, tensor_pickle(10))
    elif case == "no_pickle":
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("x.txt", "hello")
    elif case == "garbage_pickle":
        write_archive(path, b"\x80\x02}q\x00(X\xff\xff")
    else:
        path.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(TorchArchiveError, match=message) as info:
        load_torch_archive(path)
    assert "\n" not in str(info.value)
