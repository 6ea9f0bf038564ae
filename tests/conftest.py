import pytest

from pamir.data import DataError, find_corel5k


@pytest.fixture(scope="session")
def corel_root():
    try:
        return find_corel5k()
    except DataError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="session")
def corel_protocol(corel_root):
    from pamir.data import load_corel5k
    from pamir.protocol import Protocol

    return Protocol(load_corel5k(corel_root))
