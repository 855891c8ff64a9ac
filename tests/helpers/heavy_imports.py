"""Which heavy modules a command imports: the check behind "``--help`` and the early refusals
import neither torch nor transformers" (``tests/cli/test_cli_startup.py``,
``tests/recipes/test_early_refusals.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

HEAVY = (
    "torch",
    "transformers",
    "transformers.modeling_utils",
    "hfattn.models",
    "numpy",
    "matplotlib",
    "accelerate",
    "datasets",
    "tokenizers",
    "huggingface_hub",
    "gradio",
)
"""Modules that no ``--help`` may import (each costs from 0.1 s to seconds)."""

# `python -m hfattn ARGS` in-process (runpy does what -m does), then the heavy modules loaded.
RUN_AS_MAIN = """
import json, runpy, sys
argv, heavy = json.loads(sys.argv[1]), json.loads(sys.argv[2])
sys.argv = ["hfattn", *argv]
code = None
try:
    runpy.run_module("hfattn", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "heavy": [m for m in heavy if m in sys.modules]}))
"""


def heavy_modules_after(argv: list[str]) -> tuple[int, list[str], str]:
    """Run ``python -m hfattn ARGV`` in a fresh interpreter; its exit code, the modules of
    :data:`HEAVY` it imported, and its standard output but the last line."""
    result = subprocess.run(
        [sys.executable, "-c", RUN_AS_MAIN, json.dumps(argv), json.dumps(HEAVY)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    *help_lines, last = result.stdout.strip().splitlines()
    report = json.loads(last)
    return report["code"], report["heavy"], "\n".join(help_lines)
