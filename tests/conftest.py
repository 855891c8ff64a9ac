"""Shared pytest fixtures."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path

import pytest

# The test models are tiny: a second intra-op thread only spins against the first (and
# against any other process on a 2-core machine). Subprocesses inherit the variable.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# Prepared data (hfattn.data.prepared) goes to a folder of this session, never to the user's
# cache; subprocesses (xdist workers too) inherit it, and the process that made it removes it at
# exit. A test of the cache itself points it at its own tmp_path.
if "HFATTN_PREPARED_DIR" not in os.environ:
    os.environ["HFATTN_PREPARED_DIR"] = tempfile.mkdtemp(prefix="hfattn-test-prepared-")
    atexit.register(shutil.rmtree, os.environ["HFATTN_PREPARED_DIR"], ignore_errors=True)


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """An empty prepared-data cache of the test's own (``HFATTN_PREPARED_DIR``)."""
    root = tmp_path / "cache"
    monkeypatch.setenv("HFATTN_PREPARED_DIR", str(root))
    return root


# --------------------------------------------------------------------------- publishing
# A local Hub, a trained tiny char-RNN run folder and a Python environment without hfattn
# (tests/hub/test_push_*.py, tests/spaces/test_spaces.py).

TEST_TOKEN = "hf_TESTtoken0123456789secret"
"""The token the publishing tests push with; it must never show up in logs, errors or cards."""


@pytest.fixture
def hub_server(tmp_path, monkeypatch):
    """A running local Hub (``tests/helpers/hub_server.py``) that ``HF_ENDPOINT`` points at, with
    ``HF_TOKEN`` set to :data:`TEST_TOKEN` and an empty ``HF_HOME``."""
    from tests.helpers.hub_server import HubServer

    with HubServer(tmp_path / "hub") as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.setenv("HF_TOKEN", TEST_TOKEN)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
        yield server


@pytest.fixture(scope="session")
def char_rnn_run(tmp_path_factory) -> Path:
    """A finished training-run folder of a tiny trained char-RNN, with ``eval_results.json``,
    trained once for the whole session, whatever its workers (do not modify it: copy it
    first)."""
    from tests.helpers.shared_runs import shared_run
    from tests.helpers.tiny_runs import build_char_rnn_run

    return shared_run(tmp_path_factory, "char_rnn_tiny", build_char_rnn_run)


@pytest.fixture(scope="session")
def reber_attention_run(tmp_path_factory) -> Path:
    """A finished run of the Reber classifier with attention pooling, trained once for the
    whole session like :func:`char_rnn_run` (do not modify it: copy it first)."""
    from tests.helpers.shared_runs import shared_run
    from tests.helpers.tiny_runs import build_reber_attention_run

    return shared_run(tmp_path_factory, "reber_attention_tiny", build_reber_attention_run)


@pytest.fixture(scope="session")
def fresh_python(tmp_path_factory) -> Path:
    """The python of a virtual environment that has torch, transformers and gradio but where
    ``import hfattn`` fails."""
    from tests.helpers.fresh_env import make_fresh_venv

    return make_fresh_venv(tmp_path_factory.mktemp("fresh") / "venv")


def pytest_configure(config):
    """Where tests run: torch on one thread, and the tasks that recipes name registered (as
    the CLI registers them). The xdist controller of ``make test`` runs no test: it imports
    neither, and its workers start that much sooner."""
    if config.getoption("numprocesses", None) and not hasattr(config, "workerinput"):
        return
    import torch

    import hfattn.tasks  # noqa: F401

    torch.set_num_threads(1)


def pytest_collection_modifyitems(config, items):
    """Run the files with the most tests marked ``slow`` first, each file's tests together and
    in their order. ``make test``'s workers (``--dist loadfile``) take whole files in the order
    xdist gives them, the files with the most tests first; ``--no-loadscope-reorder`` would keep
    this order instead (not the default: measured once, the run took longer)."""
    slow = Counter(item.path for item in items if item.get_closest_marker("slow"))
    items.sort(key=lambda item: -slow[item.path])


def pytest_collection_finish(session):
    """Keep the garbage collector off the objects of the imports: a worker of ``make test``
    holds over a million objects (torch, transformers, gradio, the test modules), and each full
    collection walks them all. Everything alive once the tests are collected is frozen out of
    the collector's reach (``gc.freeze``), and the oldest generation is collected after 1,000
    collections of the middle one instead of 10 (young cycles are still collected as often;
    explicit ``gc.collect()`` calls, such as Accelerate's after a ``Trainer`` run, still run).
    Measured on a whole ``make test`` with 2 workers: 21 CPU-seconds in the collector against
    43 with Python's defaults, at a peak of 1.54 GB resident per worker against 1.32."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(*gc.get_threshold()[:2], 1000)
