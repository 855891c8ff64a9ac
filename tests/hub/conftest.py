"""Fixtures of the publishing tests."""

import pytest

from hfattn.hub import push as push_module


@pytest.fixture
def fast_retries(monkeypatch):
    """Keep the backoff short in tests (the policy itself is unchanged)."""
    monkeypatch.setattr(push_module, "RETRY_BASE_DELAY_S", 0.01)
