"""Where the published results come from and go: the repository's ``benchmarks/results/``
folder and the README and docs pages whose blocks :mod:`docs.hooks.results_tables` renders
from it.

Standard library only, as :mod:`docs.hooks.results_tables`.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

RESULTS = ROOT / "benchmarks" / "results"
README = ROOT / "README.md"
RESULTS_PAGE = ROOT / "docs" / "results" / "index.md"
BAHDANAU_PAGE = ROOT / "docs" / "models" / "bahdanau.md"
TRAINING_PAGE = ROOT / "docs" / "training.md"
CAUSAL_LM_PAGE = ROOT / "docs" / "tasks" / "causal-lm.md"
TRANSLATION_PAGE = ROOT / "docs" / "tasks" / "translation.md"
SWEEPS_PAGE = ROOT / "docs" / "sweeps.md"
NOTES = ROOT / "benchmarks" / "NOTES.md"
