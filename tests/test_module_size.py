"""Every module of hfattn holds one job in at most 500 lines; a module that grows past them is
split by job (``inputs.py`` and ``model_loading.py``; ``scores.py``, ``score_base.py``,
``kernel_scores.py`` and ``distance_scores.py``).

The modeling files (``hfattn/models/modeling_*.py``) are the exception: by the convention of
``transformers``, one file holds a whole architecture, so that a reader (and
``trust_remote_code``) finds every layer of a model in one place."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "hfattn"
MAX_LINES = 500


def is_exempt(module: Path) -> bool:
    """Whether ``module`` is a modeling file, one architecture in one file."""
    return module.parent == PACKAGE / "models" and module.name.startswith("modeling_")


def test_every_module_but_the_modeling_files_has_at_most_500_lines():
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 100 and any(map(is_exempt, modules))
    lengths = {
        module.relative_to(PACKAGE.parent).as_posix(): len(module.read_bytes().splitlines())
        for module in modules
        if not is_exempt(module)
    }
    assert {name: lines for name, lines in lengths.items() if lines > MAX_LINES} == {}


def test_only_the_modeling_files_are_exempt():
    models = PACKAGE / "models"
    assert is_exempt(models / "modeling_vaswani.py")
    assert not is_exempt(models / "scores.py")
    assert not is_exempt(PACKAGE / "commands" / "modeling_x.py")
