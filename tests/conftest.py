import os

import pytest

os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("MUJOCO_GL", "egl")


@pytest.fixture(scope="session", autouse=True)
def _cache_dir(tmp_path_factory):
    """simppo's cache (the CPU frames files of multi-shard packs) goes to a folder of this session, not the user's."""
    os.environ["SIMPPO_CACHE_DIR"] = str(tmp_path_factory.mktemp("simppo_cache"))


@pytest.fixture(scope="session", autouse=True)
def _warp():
    from simppo.utils.device import init_warp

    init_warp()

