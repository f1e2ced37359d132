"""GPU checks: every module sets ``pytestmark = GPU_ONLY`` (marker ``gpu``, skipped without CUDA)."""

import pytest
import torch

GPU_ONLY = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
