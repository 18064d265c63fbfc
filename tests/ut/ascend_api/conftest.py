import pytest

import apilib  # this folder is on pytest's pythonpath (setup.cfg)


@pytest.fixture(scope="session")
def api_build():
    """The real-API build of every SoC (scripts/check_ascend_api.sh --soc all), cached by source hash."""
    if not apilib.headers_available():
        pytest.skip(apilib.SKIP_REASON)
    return apilib.build()


@pytest.fixture(scope="session")
def soc_table():
    return apilib.soc_table()
