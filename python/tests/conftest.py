"""Fixtures: a client and a stream of the daemon run_pytest.sh started."""
import os

import pytest

import hrx


@pytest.fixture
def client():
    with hrx.connect(name="pytest") as client:
        yield client


@pytest.fixture
def stream(client):
    with client.device().stream() as stream:
        yield stream


@pytest.fixture
def saxpy_path():
    return os.path.join(os.environ["HRX_TEST_KERNELS"], "saxpy.so")
