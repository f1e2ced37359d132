import os

import pytest

os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("MUJOCO_GL", "egl")


@pytest.fixture(scope="session", autouse=True)
def _warp():
    from simppo.utils.device import init_warp

    init_warp()

