"""Every module holds one job in at most 500 lines (issue 72): those of hfattn, of the
benchmarks, of the docs' build hooks, of the Space apps and of the tests. A module that grows
past them is split by job (``inputs.py`` and ``model_loading.py``; ``scores.py``,
``score_base.py``, ``kernel_scores.py`` and ``distance_scores.py``; ``bench_vaswani.py`` and the
``benchmarks/lib/vaswani_*.py`` it runs; the translation Space's ``app.py`` and its
``translation_engine.py``), a test module by concern (``tests/recipes/test_fail_fast.py`` into
``test_checks_before_training.py``, ``test_data_source_typos.py`` and
``test_time_bounded_run_output.py``, with what they share in ``tests/helpers/early_errors.py``).

The modeling files (``hfattn/models/modeling_*.py``) are the exception: by the convention of
``transformers``, one file holds a whole architecture, so that a reader (and
``trust_remote_code``) finds every layer of a model in one place."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "hfattn"
OUTSIDE_THE_PACKAGE = (
    ROOT / "benchmarks",
    ROOT / "docs" / "hooks",
    ROOT / "spaces",
    ROOT / "tests",
)
"""The folders of Python beside the package that the limit holds for too."""
MAX_LINES = 500


def is_exempt(module: Path) -> bool:
    """Whether ``module`` is a modeling file, one architecture in one file."""
    return module.parent == PACKAGE / "models" and module.name.startswith("modeling_")


def python_files(folder: Path) -> list[Path]:
    """The ``.py`` files under ``folder``, sorted."""
    return sorted(path for path in folder.rglob("*.py") if "__pycache__" not in path.parts)


def too_long(modules: list[Path]) -> dict[str, int]:
    """``{path from the repository root: lines}`` of the modules of ``modules`` (the exempt
    ones left out) that have more than :data:`MAX_LINES` lines."""
    lengths = {
        module.relative_to(ROOT).as_posix(): len(module.read_bytes().splitlines())
        for module in modules
        if not is_exempt(module)
    }
    return {name: lines for name, lines in lengths.items() if lines > MAX_LINES}


def test_every_module_but_the_modeling_files_has_at_most_500_lines():
    modules = python_files(PACKAGE)
    assert len(modules) > 100 and any(map(is_exempt, modules))
    assert too_long(modules) == {}


def test_every_module_of_the_benchmarks_docs_hooks_spaces_and_tests_has_at_most_500_lines():
    found = {folder: python_files(folder) for folder in OUTSIDE_THE_PACKAGE}
    assert all(found.values())
    modules = [module for folder_modules in found.values() for module in folder_modules]
    assert not any(map(is_exempt, modules))
    assert too_long(modules) == {}


def test_only_the_modeling_files_are_exempt():
    models = PACKAGE / "models"
    assert is_exempt(models / "modeling_vaswani.py")
    assert not is_exempt(models / "scores.py")
    assert not is_exempt(PACKAGE / "commands" / "modeling_x.py")
    assert not is_exempt(ROOT / "benchmarks" / "modeling_x.py")
    assert not is_exempt(ROOT / "spaces" / "translation" / "modeling_x.py")
    assert not is_exempt(ROOT / "tests" / "models" / "modeling_x.py")
