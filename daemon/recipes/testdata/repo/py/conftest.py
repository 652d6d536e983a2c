import pytest


@pytest.fixture
def catalog():
    return {"A1": 2.5}
