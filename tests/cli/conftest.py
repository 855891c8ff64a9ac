"""Fixtures of the command tests."""

from pathlib import Path

import pytest

from tests.helpers.command_models import MODEL_NAMES, build_model_folders
from tests.helpers.saved_runs import build_saved_runs
from tests.helpers.shared_runs import shared_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """:func:`~tests.helpers.saved_runs.build_saved_runs`: untrained ``bahdanau``, ``vaswani``
    and ``lm`` run folders with saved generation settings and recipe examples."""
    return build_saved_runs(tmp_path_factory.mktemp("saved"))


@pytest.fixture(scope="session")
def models(tmp_path_factory) -> dict[str, Path]:
    """:func:`~tests.helpers.command_models.build_model_folders`: untrained tiny model folders
    of every kind (``lm``, ``translator``, ``classifier``, ``distilbert``, ``masked-lm``),
    built once for the whole session, whatever its workers, and shared by the model-command
    tests (do not modify them: copy them first)."""
    root = shared_run(tmp_path_factory, "command_models", build_model_folders)
    return {name: root / name for name in MODEL_NAMES}
