"""What the recipe checks need of :mod:`hfattn.models` before torch, read from the files' source
with :mod:`ast`: the literals its torch-free modules assign (:func:`models_literal`:
:data:`~hfattn.models.score_names.SCORE_NAMES`), and of each config class its name, its fields
(:func:`config_fields`, :func:`pretrained_config_fields`), their types
(:func:`config_field_types`) and the rules they are declared with (:func:`config_field_rules`:
``dropout: float | int = rate(0.1)``). Only the rules' own module,
:mod:`hfattn.models.config_checks` (standard library only), is executed, on its own.

Importing them through their package would import ``hfattn.models`` (torch and every
architecture, seconds).
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import sys
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
    are not imported): ``models_literal("score_names", "SCORE_NAMES")``.

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
def _config_class(model_type: str) -> tuple[str, ast.ClassDef] | None:
    """The module name and class body of hfattn's config class of ``model_type`` (the class
    of ``hfattn/models/configuration_*.py`` that sets ``model_type = "<model_type>"``), or
    ``None`` for a type hfattn does not define."""
    for path in sorted(_MODELS_DIR.glob("configuration_*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and _class_model_type(node) == model_type:
                return path.stem, node
    return None


def config_class_name(model_type: str) -> str | None:
    """The name of hfattn's config class of ``model_type`` (``"CharRNNConfig"``), or ``None``
    for a type hfattn does not define."""
    found = _config_class(model_type)
    return None if found is None else found[1].name


def _own_fields(node: ast.ClassDef):
    """The annotated fields of a class body (``ClassVar`` ones left out), as ``AnnAssign``."""
    for item in node.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            annotation = item.annotation
            head = annotation.value if isinstance(annotation, ast.Subscript) else annotation
            if not (isinstance(head, ast.Name) and head.id == "ClassVar"):
                yield item


def config_fields(model_type: str) -> tuple[str, ...]:
    """The fields hfattn's config class of ``model_type`` declares itself (those of
    ``PreTrainedConfig`` are :func:`pretrained_config_fields`), in ``dataclasses.fields``
    order, read from its source; ``()`` for a type hfattn does not define."""
    found = _config_class(model_type)
    return () if found is None else tuple(f.target.id for f in _own_fields(found[1]))


@functools.cache
def pretrained_config_fields() -> tuple[str, ...]:
    """The fields every config class inherits from ``transformers``' ``PreTrainedConfig``, in
    ``dataclasses.fields`` order, read from its source (the package is found, not imported:
    seconds; the file is parsed in some 0.1 s, so only when a key is not the class's own)."""
    spec = importlib.util.find_spec("transformers")
    path = Path(next(iter(spec.submodule_search_locations))) / "configuration_utils.py"
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ClassDef) and node.name == "PreTrainedConfig":
            return tuple(f.target.id for f in _own_fields(node))
    return ()


@functools.cache
def config_field_rules(model_type: str) -> dict:
    """Field → rule (:class:`~hfattn.models.config_checks.PositiveInt`, ``NonNegativeInt``,
    ``PositiveNumber``, ``Rate``, ``Choice``)
    of every field of hfattn's config class of ``model_type`` declared with one
    (``cell: str = choice("gru", CELL_TYPES)``), read from the class body: the declaration is
    called with its arguments (literals, or names the configuration file or a sibling module
    assigns a literal to) by :mod:`hfattn.models.config_checks`, loaded on its own; ``{}`` for a
    type hfattn does not define."""
    found = _config_class(model_type)
    if found is None:
        return {}
    module, node = found
    checks = _config_checks()
    rules = {}
    for item in _own_fields(node):
        call = item.value
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id in checks.RULE_FIELDS
        ):
            args = [_argument(module, arg) for arg in call.args]
            declared = checks.RULE_FIELDS[call.func.id](*args)
            rules[item.target.id] = declared.metadata[checks.RULE]
    return rules


def _argument(module: str, node: ast.expr):
    """The value of an argument of a rule declaration in ``hfattn/models/<module>.py``: a
    literal, or a name the module assigns a literal to or imports from a sibling that does."""
    if not isinstance(node, ast.Name):
        return ast.literal_eval(node)
    if node.id in _models_literals(module):
        return _models_literals(module)[node.id]
    return models_literal(_imported_from(module, node.id), node.id)


@functools.cache
def _imported_from(module: str, name: str) -> str:
    """The sibling module that ``hfattn/models/<module>.py`` imports ``name`` from
    (``from .score_names import SCORE_NAMES``).

    Raises:
        LookupError: the module imports no ``name`` from a sibling.
    """
    tree = ast.parse((_MODELS_DIR / f"{module}.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            if any(alias.name == name and alias.asname is None for alias in node.names):
                return node.module
    raise LookupError(f"hfattn/models/{module}.py imports no {name} from a sibling")


@functools.cache
def _config_checks():
    """:mod:`hfattn.models.config_checks` (standard library only) loaded on its own, not
    through its package (torch)."""
    name = "_hfattn_config_checks"
    spec = importlib.util.spec_from_file_location(name, _MODELS_DIR / "config_checks.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # as an import registers a module before running it
    spec.loader.exec_module(module)
    return module


@functools.cache
def config_field_types(model_type: str) -> dict[str, type]:
    """The fields of hfattn's config class of ``model_type`` and their types, read from the
    class body in ``hfattn/models/configuration_*.py`` (the class that sets ``model_type =
    "<model_type>"``) without importing it (transformers and torch: seconds): ``{"hidden_size":
    int, "dropout": float | int, "head_dim": int | None, ...}``. A field whose annotation is
    more than builtin scalars, ``list`` / ``dict`` / ``tuple`` and ``None`` joined by ``|`` is
    left out, and so are the fields of the base classes; ``{}`` for a type hfattn does not
    define."""
    found = _config_class(model_type)
    if found is None:
        return {}
    fields = {}
    for item in _own_fields(found[1]):
        hint = _annotation_type(item.annotation)
        if hint is not None:
            fields[item.target.id] = hint
    return fields


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


__all__ = [
    "config_class_name",
    "config_field_rules",
    "config_field_types",
    "config_fields",
    "models_literal",
    "pretrained_config_fields",
]
