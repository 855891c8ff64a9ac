"""``hfattn ARGV`` in a fresh interpreter, for the fail-fast tests (issue 21,
``tests/recipes/``): the error it fails with, the heavy modules it imported by then and the
network connections it attempted (this test process has imported torch already)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.network import RECORD_CONNECTIONS

HEAVY = ("torch", "transformers", "accelerate", "datasets")
"""What an early error must not import (it took 4 to 50 s: these imports, and Hub retries)."""

# `hfattn ARGV` in a fresh interpreter; the last stdout line reports the exit status, which
# heavy modules were imported by then and the network connections attempted
RUN_CLI = (
    RECORD_CONNECTIONS
    + """
import json
from hfattn.cli import main
code = main(json.loads(sys.argv[1]))
heavy = [m for m in json.loads(sys.argv[2]) if m in sys.modules]
print(json.dumps({"code": code, "heavy": heavy, "connections": connections}))
"""
)


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a CLI subprocess: no token, an empty ``HF_HOME``-less Hub setting is
    left to the caller; one thread."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HF_HUB_OFFLINE")}
    return {**env, "OMP_NUM_THREADS": "1", **extra}


def early_error(argv: list[str], cwd: Path, **env: str) -> tuple[str, list[str], list[str]]:
    """Run ``hfattn ARGV`` (expected to fail with status 2); return its stderr, the heavy
    modules it imported and its connection attempts."""
    result = subprocess.run(
        [sys.executable, "-c", RUN_CLI, json.dumps(argv), json.dumps(HEAVY)],
        cwd=cwd,
        env=clean_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["code"] == 2, result.stderr
    return result.stderr, report["heavy"], report["connections"]


def assert_one_error(argv: list[str], cwd: Path, expected: str, **env: str):
    """``hfattn ARGV`` fails with one error line holding ``expected``; returns its stderr, the
    heavy modules it imported and its connection attempts."""
    err, heavy, connections = early_error(argv, cwd, **env)
    assert expected in err, err
    assert err.count("error: ") == 1, err
    return err, heavy, connections


def assert_fast_error(argv: list[str], cwd: Path, expected: str, **env: str) -> str:
    """The error comes at once: before any heavy import and without trying the network.
    Returns its stderr."""
    err, heavy, connections = assert_one_error(argv, cwd, expected, **env)
    assert heavy == [], f"imported {heavy} before the error"
    assert connections == [], f"tried the network ({connections}) before {err.strip()}"
    return err
