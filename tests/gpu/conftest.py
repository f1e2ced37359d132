"""Fixtures of the GPU checks (``pytest -m gpu tests/gpu``; ``benchmarks/gpu_check.sh`` runs them).

``gpu_report(name, value)`` prints one ``name: value`` line and appends it to the results file named by
``SIMPPO_GPU_RESULTS`` (nothing when unset); ``cuda_device`` skips where Warp sees no CUDA device."""

import os

import pytest
import warp as wp

from simppo.utils.device import init_warp


@pytest.fixture(scope="session")
def gpu_report():
    path = os.environ.get("SIMPPO_GPU_RESULTS")

    def report(name: str, value) -> None:
        line = f"{name}: {value}"
        print(line)
        if path:
            with open(path, "a") as f:
                f.write(line + "\n")

    return report


@pytest.fixture()
def cuda_device() -> str:
    init_warp()
    if not wp.is_cuda_available():
        pytest.skip("Warp sees no CUDA device")
    return "cuda:0"
