"""The optional extras of hfattn (``pip install 'hfattn[bible]'``): what each brings, and the one
line a user gets when one is missing.

An :class:`Extra` is declared once, next to the code that needs it (the Bible source's
``pysword`` in :mod:`hfattn.data.bible`, LoRA's ``peft`` on the recipe's ``lora:`` section, ...);
the recipe checks ask a recipe which extras it needs
(:meth:`hfattn.recipes.schema.RecipeBase.required_extras`) before any data is read, and the code
that imports the package raises the same line if it is reached anyway. Whether a package is
installed is asked of the import system (``importlib.util.find_spec``), without importing it.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from .field_checks import RecipeError


class MissingExtraError(RecipeError):
    """A package of an optional extra is not installed; the message is one line naming the
    extra to install."""


@dataclass(frozen=True)
class Extra:
    """One optional extra of hfattn's ``pyproject.toml`` and the module that shows it is
    installed."""

    name: str
    """The extra's name in ``[project.optional-dependencies]`` (``bible``)."""
    module: str
    """The top-level module that the extra installs and hfattn imports (``pysword``)."""

    def installed(self) -> bool:
        """Whether :attr:`module` can be imported (it is not imported)."""
        try:
            return importlib.util.find_spec(self.module) is not None
        except (ImportError, ValueError):  # a finder that refuses it, a half-removed module
            return False

    def error(self, what: str) -> MissingExtraError:
        """The error saying that ``what`` (``data.source: 'bible'``) needs this extra."""
        return MissingExtraError(
            f"{what} needs {self.module}, which is not installed: pip install 'hfattn[{self.name}]'"
        )

    def require(self, what: str) -> None:
        """Raise :meth:`error` for ``what`` unless the extra is installed.

        Raises:
            MissingExtraError: ``data.source: 'bible' needs pysword, which is not installed:
                pip install 'hfattn[bible]'``.
        """
        if not self.installed():
            raise self.error(what)


def require_extras(needed) -> None:
    """Every ``(what, extra)`` of ``needed`` must be installed; the first missing one is
    raised (:meth:`Extra.require`)."""
    for what, extra in needed:
        extra.require(what)


__all__ = ["Extra", "MissingExtraError", "require_extras"]
