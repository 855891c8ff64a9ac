"""The wheel's layout beyond what ``pyproject.toml`` can say: the top-level ``recipes/``,
``model_cards/`` and ``spaces/`` folders (one copy each, in the source tree) travel as package
data under ``hfattn/_assets/``, where :func:`hfattn.common.assets.asset_dir` finds them in an
installed hfattn (in a clone it finds the folders themselves). Everything else is configured in
``pyproject.toml`` (the files of each folder: ``[tool.setuptools.package-data]``)."""

from pathlib import Path

from setuptools import find_namespace_packages, find_packages, setup

ASSET_FOLDERS = ("recipes", "model_cards", "spaces")
"""As :data:`hfattn.common.assets.ASSET_FOLDERS` (tests/recipes/test_shipped.py checks it)."""


def asset_packages(folder: str) -> list[str]:
    """``hfattn._assets.<folder>`` and one package name per sub-folder of ``folder``."""
    subfolders = [p for p in sorted(Path(folder).rglob("*")) if p.is_dir()]
    return [f"hfattn._assets.{folder}"] + [
        ".".join(("hfattn", "_assets", folder, *p.relative_to(folder).parts))
        for p in subfolders
        if "__pycache__" not in p.parts
    ]


setup(
    packages=[
        *find_packages(include=["hfattn*"]),
        # the metric scripts that `evaluate.load` reads by path: folders without __init__.py
        *find_namespace_packages(include=["hfattn.evaluation.metrics.*"], exclude=["*__pycache__"]),
        *(package for folder in ASSET_FOLDERS for package in asset_packages(folder)),
    ],
    package_dir={f"hfattn._assets.{name}": name for name in ASSET_FOLDERS},
)
