"""Read a ``torch.save`` zip archive (ProtoMotions ``.motion`` files) without running any code it names.

A torch archive is a zip holding ``<prefix>/data.pkl`` (a pickle whose tensors point at storages by persistent
id) and one ``<prefix>/data/<key>`` member per storage. :func:`load_torch_archive` unpickles ``data.pkl`` with
an unpickler that resolves no name from the file: tensors, storages, ``OrderedDict`` and numpy arrays / scalars
are rebuilt by this module's own functions (as numpy arrays, bounds checked against their storage), and every
other class or function the pickle names becomes an inert :class:`Opaque` placeholder: its module is never
imported and nothing of it is called. Callers skip placeholders (:func:`opaque_entries` names them).
"""

from __future__ import annotations

import io
import math
import pickle
import zipfile
import zlib
from pathlib import Path

import numpy as np

#: Storage classes of ``torch.save`` → numpy dtype (``bfloat16`` is widened to float32 on reading).
_STORAGE_DTYPES = {
    "DoubleStorage": np.float64, "FloatStorage": np.float32, "HalfStorage": np.float16,
    "BFloat16Storage": "bfloat16", "LongStorage": np.int64, "IntStorage": np.int32, "ShortStorage": np.int16,
    "CharStorage": np.int8, "ByteStorage": np.uint8, "BoolStorage": np.bool_,
}


class TorchArchiveError(ValueError):
    """What is wrong with an archive (one line; the caller adds the file name)."""


class Opaque:
    """Stands in for an object of a class the archive names but this reader does not build (``origin``:
    ``module.name``). Accepts any constructor arguments and state, and does nothing with them."""

    origin = "?"

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        pass

    def __repr__(self) -> str:
        return f"<not read: {self.origin}>"


def _opaque_class(module: str, name: str) -> type:
    return type("Opaque", (Opaque,), {"origin": f"{module}.{name}"})


class _StorageType:
    def __init__(self, name: str):
        self.name, self.dtype = name, _STORAGE_DTYPES[name]


def _rebuild_tensor(storage, offset, size, stride, *_ignored) -> np.ndarray:
    """``torch._utils._rebuild_tensor_v2`` for a numpy storage: a bounds-checked strided copy."""
    if not isinstance(storage, np.ndarray) or storage.ndim != 1:
        raise TorchArchiveError("a tensor does not point at a storage")
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if len(size) != len(stride) or any(s < 0 for s in size) or any(s < 0 for s in stride) or offset < 0:
        raise TorchArchiveError(f"tensor of size {size}, stride {stride} at offset {offset} is malformed")
    if math.prod(size) == 0:
        return np.zeros(size, dtype=storage.dtype)
    last = int(offset) + sum((n - 1) * s for n, s in zip(size, stride, strict=True))
    if last >= storage.shape[0]:
        raise TorchArchiveError(f"tensor of size {size} reaches element {last} of a storage of {storage.shape[0]}")
    view = np.lib.stride_tricks.as_strided(storage[int(offset):], size,
                                           tuple(s * storage.itemsize for s in stride), writeable=False)
    return np.array(view)


def _reconstruct_ndarray(_cls, _shape, _dtype) -> _NdarrayState:
    return _NdarrayState()


class _NdarrayState:
    """A pickled numpy array (``numpy.core.multiarray._reconstruct`` then ``__setstate__``), rebuilt from its
    raw bytes for plain number dtypes only."""

    def __setstate__(self, state):
        try:
            _version, shape, dtype, fortran, data = state
        except (TypeError, ValueError):
            raise TorchArchiveError("a pickled numpy array has an unexpected state") from None
        if not isinstance(dtype, np.dtype) or dtype.kind not in "biuf" or not isinstance(data, bytes):
            raise TorchArchiveError(f"a pickled numpy array of dtype {dtype} is not a plain number array")
        shape = tuple(int(s) for s in shape)
        if math.prod(shape) * dtype.itemsize != len(data):
            raise TorchArchiveError(f"a pickled numpy array of shape {shape} holds {len(data)} bytes")
        self.array = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C").copy()


def _numpy_dtype(name, *_args) -> np.dtype:
    try:
        dt = np.dtype(name)
    except TypeError:
        raise TorchArchiveError(f"unknown numpy dtype {name!r}") from None
    if dt.kind not in "biuf":
        raise TorchArchiveError(f"numpy dtype {dt} is not a plain number type")
    return dt


def _numpy_scalar(dtype, data: bytes):
    if not isinstance(dtype, np.dtype) or not isinstance(data, bytes) or len(data) != dtype.itemsize:
        raise TorchArchiveError("a pickled numpy scalar is malformed")
    return np.frombuffer(data, dtype=dtype)[0]


def _latin1_bytes(text, encoding="latin1") -> bytes:
    """``_codecs.encode``: how protocol-2 pickles write ``bytes`` (latin-1 text)."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise TorchArchiveError("a pickled byte string is malformed")
    return text.encode("latin1")


def _ordered_dict(*args):
    return dict(*args)


_NUMPY_MODULES = ("numpy.core.multiarray", "numpy._core.multiarray")
_BUILDERS = {("collections", "OrderedDict"): _ordered_dict,
             ("_codecs", "encode"): _latin1_bytes,
             ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
             ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
             ("numpy", "dtype"): _numpy_dtype,
             ("numpy", "ndarray"): "numpy.ndarray"}  # only ever the first argument of _reconstruct
for _m in _NUMPY_MODULES:
    _BUILDERS[(_m, "_reconstruct")] = _reconstruct_ndarray
    _BUILDERS[(_m, "scalar")] = _numpy_scalar


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: bytes, zf: zipfile.ZipFile, prefix: str, byteorder: str, max_bytes: int):
        super().__init__(io.BytesIO(data))
        self.zf, self.prefix, self.byteorder, self.max_bytes = zf, prefix, byteorder, max_bytes
        self.storages: dict[str, np.ndarray] = {}

    def find_class(self, module: str, name: str):
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(name)
        return _BUILDERS.get((module, name)) or _opaque_class(module, name)

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage" and isinstance(pid[1], _StorageType)):
            raise TorchArchiveError(f"unsupported persistent id {str(pid)[:80]}")
        _, stype, key, _location, numel = pid
        if key not in self.storages:
            self.storages[str(key)] = self._read_storage(stype, str(key), int(numel))
        return self.storages[str(key)]

    def _read_storage(self, stype: _StorageType, key: str, numel: int) -> np.ndarray:
        member = f"{self.prefix}/data/{key}"
        try:
            info = self.zf.getinfo(member)
        except KeyError:
            raise TorchArchiveError(f"storage {key} is missing from the archive") from None
        bf16 = stype.dtype == "bfloat16"
        dtype = np.dtype(np.uint16 if bf16 else stype.dtype).newbyteorder("<" if self.byteorder == "little" else ">")
        nbytes = numel * dtype.itemsize
        if numel < 0 or nbytes > self.max_bytes:
            raise TorchArchiveError(f"storage {key} of {numel} elements is too large")
        if info.file_size != nbytes:
            raise TorchArchiveError(f"storage {key} needs {nbytes} bytes, the archive holds {info.file_size} "
                                    "(truncated or corrupt)")
        a = np.frombuffer(self.zf.read(info), dtype=dtype)
        if bf16:
            return (a.astype(np.uint32) << 16).view(np.float32)
        return a.astype(dtype.newbyteorder("="))


def load_torch_archive(path: str | Path, max_bytes: int = 2**30):
    """The object pickled in the ``torch.save`` archive ``path``: tensors and numpy arrays as numpy arrays,
    ``OrderedDict`` as ``dict``, anything else the pickle names as an :class:`Opaque`. ``max_bytes`` bounds
    each storage. Raises :class:`TorchArchiveError` (one line) on anything malformed."""
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:
        raise TorchArchiveError(f"not a torch zip archive ({str(e).splitlines()[0] if str(e) else type(e).__name__}"
                                "; the legacy non-zip torch format is not read)") from None
    with zf:
        pkls = [n for n in zf.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
        if len(pkls) != 1:
            raise TorchArchiveError("not a torch archive: no single <name>/data.pkl member")
        prefix = pkls[0].split("/")[0]
        try:
            byteorder = zf.read(f"{prefix}/byteorder").decode().strip()
        except KeyError:
            byteorder = "little"
        except (zipfile.BadZipFile, zlib.error, OSError, UnicodeDecodeError) as e:
            raise TorchArchiveError(f"unreadable byteorder member ({e})") from None
        if byteorder not in ("little", "big"):
            raise TorchArchiveError(f"unknown byte order {byteorder[:20]!r}")
        try:
            data = zf.read(pkls[0])
            obj = _Unpickler(data, zf, prefix, byteorder, max_bytes).load()
        except TorchArchiveError:
            raise
        except RecursionError:
            raise TorchArchiveError("the pickle nests too deeply") from None
        except (pickle.UnpicklingError, zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, TypeError,
                KeyError, IndexError, AttributeError, MemoryError) as e:
            reason = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise TorchArchiveError(f"unreadable pickle ({reason[:200]})") from None
    return _unwrap(obj)


def _unwrap(obj, depth: int = 0):
    """Replace rebuilt numpy-array states by their arrays, in dicts, lists and tuples."""
    if depth > 50:
        raise TorchArchiveError("the archive's containers nest too deeply")
    if isinstance(obj, _NdarrayState):
        if not hasattr(obj, "array"):
            raise TorchArchiveError("a pickled numpy array has no data")
        return obj.array
    if isinstance(obj, dict):
        return {k: _unwrap(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_unwrap(v, depth + 1) for v in obj)
    return obj


def opaque_entries(d: dict) -> dict[str, str]:
    """``{key: "module.name"}`` of the entries of ``d`` that hold (or contain) objects not read."""
    def origin(v) -> str | None:
        if isinstance(v, Opaque):
            return v.origin
        if isinstance(v, (list, tuple)):
            return next((o for o in map(origin, v) if o), None)
        if isinstance(v, dict):
            return next((o for o in map(origin, v.values()) if o), None)
        return None
    return {str(k): o for k, v in d.items() if (o := origin(v))}
