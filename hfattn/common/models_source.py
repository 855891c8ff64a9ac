"""What the recipe checks need of :mod:`hfattn.models` before torch: the literals its torch-free
modules assign (:func:`models_literal`: :data:`~hfattn.models.score_names.SCORE_NAMES`, the
lists of :mod:`~hfattn.models.config_fields`) and the field types of its config classes
(:func:`config_field_types`), read from the files' source with :mod:`ast`; nothing there is
executed.

Importing them through their package would import ``hfattn.models`` (torch and every
architecture, seconds).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

_MODELS_DIR = Path(__file__).parent.parent / "models"
_ANNOTATION_NAMES = {
    "bool": bool,
    "int": int,
    "float": float,
    "str": str,
    "list": list,
    "tuple": tuple,
    "dict": dict,
}
"""The names a config field's annotation is read from (:func:`config_field_types`)."""


def models_literal(module: str, name: str):
    """The value of the top-level assignment ``name = <literal>`` in ``hfattn/models/<module>.py``,
    read with ``ast.literal_eval`` (nothing in the file is executed, ``hfattn.models`` and torch
    are not imported): ``models_literal("config_fields", "CONFIG_FIELDS")``.

    Raises:
        LookupError: the file assigns no literal to ``name``.
    """
    literals = _models_literals(module)
    if name not in literals:
        raise LookupError(f"hfattn/models/{module}.py assigns no literal {name}")
    return literals[name]


@functools.cache
def _models_literals(module: str) -> dict:
    """Every top-level ``name = <literal>`` of ``hfattn/models/<module>.py``, the file parsed
    once."""
    tree = ast.parse((_MODELS_DIR / f"{module}.py").read_text(encoding="utf-8"))
    literals = {}
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        if isinstance(target, ast.Name) and node.value is not None:
            try:
                literals[target.id] = ast.literal_eval(node.value)
            except (ValueError, TypeError):
                continue  # not a literal (an expression): not readable without executing
    return literals


@functools.cache
def config_field_types(model_type: str) -> dict[str, type]:
    """The fields of hfattn's config class of ``model_type`` and their types, read from the
    class body in ``hfattn/models/configuration_*.py`` (the class that sets ``model_type =
    "<model_type>"``) without importing it (transformers and torch: seconds): ``{"hidden_size":
    int, "dropout": float | int, "head_dim": int | None, ...}``. A field whose annotation is
    more than builtin scalars, ``list`` / ``dict`` / ``tuple`` and ``None`` joined by ``|`` is
    left out, and so are the fields of the base classes; ``{}`` for a type hfattn does not
    define."""
    for path in sorted(_MODELS_DIR.glob("configuration_*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and _class_model_type(node) == model_type:
                fields = {}
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        hint = _annotation_type(item.annotation)
                        if hint is not None:
                            fields[item.target.id] = hint
                return fields
    return {}


def _class_model_type(node: ast.ClassDef) -> str | None:
    """The string a class body assigns to ``model_type``, or ``None``."""
    for item in node.body:
        if (
            isinstance(item, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "model_type" for t in item.targets)
            and isinstance(item.value, ast.Constant)
        ):
            return item.value.value
    return None


def _annotation_type(node: ast.expr):
    """The type an annotation names (``int | None``, ``list[str]`` → ``list``), or ``None``
    for one outside :data:`_ANNOTATION_NAMES` (``ClassVar[...]``, a class of the module)."""
    if isinstance(node, ast.Constant) and node.value is None:
        return type(None)
    if isinstance(node, ast.Name):
        return _ANNOTATION_NAMES.get(node.id)
    if isinstance(node, ast.Subscript):
        return _annotation_type(node.value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, right = _annotation_type(node.left), _annotation_type(node.right)
        return left | right if left is not None and right is not None else None
    return None


__all__ = ["config_field_types", "models_literal"]
