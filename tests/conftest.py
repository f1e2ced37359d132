import os

import pytest

os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("MUJOCO_GL", "egl")


@pytest.fixture(scope="session", autouse=True)
def _warp():
    from simppo.utils.device import init_warp

    init_warp()


import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "agent"))
