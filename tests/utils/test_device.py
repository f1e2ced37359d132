"""Device-name normalisation, Fabric placement, stream scoping and the graph-capture prerequisites, on CPU
(CUDA-only branches run against faked torch / Warp queries)."""

import contextlib
import types

import pytest
import torch
import warp as wp

from simppo.utils import device as D


@pytest.fixture()
def fake_gpus(monkeypatch):
    """torch sees 4 GPUs, the current one is cuda:2 (nothing is initialised)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 2)


def test_names_are_canonical_on_a_cpu_machine(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert D.resolve_device("auto") == "cpu"
    assert D.resolve_device("cpu") == D.resolve_device(torch.device("cpu")) == "cpu"
    assert D.resolve_device("cuda") == "cuda:0"  # comparable names even without CUDA
    assert D.resolve_device("cuda:3") == D.resolve_device(torch.device("cuda", 3)) == "cuda:3"
    assert D.warp_device("cuda") == "cuda:0" and D.warp_device(torch.device("cuda:1")) == "cuda:1"


def test_cuda_means_the_current_device_and_auto_the_local_rank(fake_gpus, monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert D.resolve_device("auto") == "cuda:0"
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert D.resolve_device("auto") == "cuda:3"
    monkeypatch.setenv("LOCAL_RANK", "5")  # more ranks than GPUs on this node: wrap around
    assert D.resolve_device("auto") == "cuda:1"
    assert D.resolve_device("cuda") == D.resolve_device(torch.device("cuda")) == "cuda:2"
    assert torch.device(D.resolve_device("cuda")) == torch.device("cuda:2")  # unlike torch.device("cuda")


@pytest.mark.parametrize("bad", ["mps", "meta", "gpu", "cuda:x"])
def test_unsupported_devices_raise_one_line(bad):
    with pytest.raises(ValueError, match=f"device={bad!r}"):
        D.resolve_device(bad)


def test_fabric_is_placed_on_the_requested_gpu(monkeypatch):
    seen = []

    class FakeFabric:
        def __init__(self, **kwargs):
            seen.append(kwargs)

    import lightning_fabric

    monkeypatch.setattr(lightning_fabric, "Fabric", FakeFabric)
    D.fabric_for("cuda:1")
    D.fabric_for(torch.device("cuda", 0))
    D.fabric_for("cpu")
    assert seen == [{"accelerator": "cuda", "devices": [1], "precision": "32-true"},
                    {"accelerator": "cuda", "devices": [0], "precision": "32-true"},
                    {"accelerator": "cpu", "devices": 1, "precision": "32-true"}]


def test_real_cpu_fabric_device_round_trips():
    assert D.resolve_device(D.fabric_for("cpu").device) == "cpu"


def test_stream_scope_is_a_no_op_on_cpu():
    assert isinstance(D.torch_stream_scope("cpu"), contextlib.nullcontext)
    assert isinstance(D.torch_stream_scope(torch.device("cpu")), contextlib.nullcontext)
    assert isinstance(D.torch_stream_scope(wp.get_device("cpu")), contextlib.nullcontext)

    class Thing:
        device = "cpu"

        @D.on_torch_stream
        def work(self, x, k=1):
            return x + k

    assert Thing().work(1, k=2) == 3


def test_tf32_only_on_cuda():
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        D.enable_tf32("cpu")
        assert torch.get_float32_matmul_precision() == "highest"
        D.enable_tf32("cuda:0")
        assert torch.get_float32_matmul_precision() == "high"
    finally:
        torch.set_float32_matmul_precision(before)


def test_graph_capture_needs_cuda_and_the_mempool(monkeypatch):
    assert not D.graph_capture_available("cpu")
    fake = types.SimpleNamespace(is_cuda=True, __str__=lambda self: "cuda:0")
    monkeypatch.setattr(D.wp, "get_device", lambda name=None: fake)
    monkeypatch.setattr(D.wp, "is_mempool_supported", lambda dev: True)
    monkeypatch.setattr(D.wp, "is_mempool_enabled", lambda dev: True)
    assert D.graph_capture_available("cuda:0")
    assert not D.graph_capture_available("cuda:0", requested=False)
    monkeypatch.setattr(D.wp, "is_mempool_enabled", lambda dev: False)
    with pytest.warns(RuntimeWarning, match=r"CUDA graph capture is off .*set_mempool_enabled"):
        assert not D.graph_capture_available("cuda:0")
    monkeypatch.setattr(D.wp, "is_mempool_supported", lambda dev: False)
    with pytest.warns(RuntimeWarning, match="memory pools are not supported"):
        assert not D.graph_capture_available("cuda:0")


def test_motion_lib_device_is_canonical():
    from simppo.motion import DEFAULT_MOTIONS, MotionLib

    for name in ("cpu", torch.device("cpu")):
        lib = MotionLib([str(DEFAULT_MOTIONS)], device=name)
        assert lib.device == torch.device("cpu") and lib.frames["dof_pos"].device == lib.device
