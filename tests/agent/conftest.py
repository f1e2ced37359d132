import pytest

from tests.agent.motion_packs import build_packs


@pytest.fixture(scope="session")
def motion_packs(tmp_path_factory):
    """``{name: pack dir}`` of :mod:`tests.agent.motion_packs` (built once per session)."""
    return build_packs(tmp_path_factory.mktemp("motion_packs"))
