"""Fixtures of the command tests."""

import pytest

from tests.helpers.saved_runs import build_saved_runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """:func:`~tests.helpers.saved_runs.build_saved_runs`: untrained ``bahdanau``, ``vaswani``
    and ``lm`` run folders with saved generation settings and recipe examples."""
    return build_saved_runs(tmp_path_factory.mktemp("saved"))
