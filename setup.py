"""The wheel's layout beyond what ``pyproject.toml`` can say: the top-level ``recipes/``,
``model_cards/`` and ``spaces/`` folders (one copy each, in the source tree) travel as package
data under ``hfattn/_assets/``, where :func:`hfattn.common.assets.asset_dir` finds them in an
installed hfattn (in a clone it finds the folders themselves). Everything else is configured in
``pyproject.toml`` (the files of each folder: ``[tool.setuptools.package-data]``)."""

from setuptools import find_packages, setup

ASSET_FOLDERS = ("recipes", "model_cards", "spaces")
"""As :data:`hfattn.common.assets.ASSET_FOLDERS` (tests/recipes/test_shipped.py checks they agree)."""

setup(
    packages=[
        *find_packages(include=["hfattn*"]),
        *(f"hfattn._assets.{name}" for name in ASSET_FOLDERS),
    ],
    package_dir={f"hfattn._assets.{name}": name for name in ASSET_FOLDERS},
)
