"""hfattn's test suite: one folder per layer of the package (the layers of the import-linter
contracts in ``pyproject.toml``), plus ``spaces/``, ``docs/``, ``benchmarks/`` and the shared
``helpers/``.

The folders are packages, so pytest puts the repository root on the import path (its
``prepend`` import mode inserts the folder above the outermost package) and every module names
what it shares by its full name: ``from tests.helpers.tiny_runs import build_char_rnn_run``,
``from benchmarks.lib.benchlib import BenchReport``. A new test file in a layer folder needs
nothing more; a new folder needs an empty ``__init__.py``.
"""
