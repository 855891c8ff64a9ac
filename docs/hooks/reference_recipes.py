"""The generated ``reference/recipes.md``: every section and field of every task's recipe
dataclass (name, type, default, the field's attribute docstring, the values a text field
accepts) and every field of each model config (from the ``Args:`` of its docstring), by
:func:`recipe_reference`.

Importable without MkDocs (``tests/docs/test_docs.py`` checks its output).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import textwrap
import typing

if __package__:  # docs.hooks.reference_recipes (tests)
    from .reference_cells import code_cell, format_value, text_cell
else:  # MkDocs loads a hook with its folder on the path
    from reference_cells import code_cell, format_value, text_cell


class FieldDoc(typing.NamedTuple):
    """One field of a recipe section or model config, as the reference lists it."""

    name: str
    type: str
    default: str
    doc: str


def attribute_docstrings(cls: type) -> dict[str, str]:
    """``{field: docstring}`` of the attribute docstrings (the string literal right after an
    annotated field) of ``cls`` and its bases; a class's own docstring of a field wins over a
    base's, and a field that none documents is absent."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object:
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        tree = ast.parse(source)
        body = next((n.body for n in tree.body if isinstance(n, ast.ClassDef)), [])
        for node, after in zip(body, body[1:], strict=False):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


def field_default(field: dataclasses.Field) -> str:
    """The formatted default of a dataclass field (``required`` when it has none)."""
    if field.default is not dataclasses.MISSING:
        return format_value(field.default)
    if field.default_factory is not dataclasses.MISSING:
        return format_value(field.default_factory())
    return "required"


def type_name(hint: object) -> str:
    """A field's type as written in the code (``int | None``, ``list[str]``)."""
    if isinstance(hint, str):
        return hint
    if isinstance(hint, type) and not typing.get_args(hint):
        return hint.__name__
    return str(hint).replace("typing.", "")


def section_fields(cls: type) -> list[FieldDoc]:
    """Every field of the dataclass ``cls`` (inherited ones included), in declaration order,
    described by its attribute docstring; a field without one that the section's docstring
    (shown above its table) names is marked :data:`SEE_SECTION`."""
    docs = attribute_docstrings(cls)
    fields = [
        FieldDoc(
            f.name,
            type_name(f.type),
            field_default(f),
            docs.get(f.name) or (SEE_SECTION if mentioned(cls, f.name) else ""),
        )
        for f in dataclasses.fields(cls)
    ]
    return [with_choices(cls, f) for f in fields]


SEE_SECTION = "(see the section's description above)"


PROBE = "\u2400"
"""A value no field accepts, given to a section to learn the allowed values of a field."""
CHOICE_ERROR = r"^(?:\w+\.)?{name}(?::| must be one of)(?:.*?is not one of)? (?P<choices>[^;()]+)"


def allowed_values(cls: type, name: str) -> list[str]:
    """The values a text field of ``cls`` (a recipe section or a model config) accepts, as its
    own validation lists them when given a value it refuses (``training.optimizer: 'x' is not
    one of adamw, ...``); ``[]`` when the field takes free text."""
    try:
        cls(**{name: PROBE})
    except Exception as err:  # noqa: BLE001 (any refusal: only its message matters)
        match = re.match(CHOICE_ERROR.format(name=re.escape(name)), str(err))
        if match and "one of" in str(err):
            values = [v.strip() for v in match["choices"].split(",")]
            return ["null" if v == "None" else v for v in values if v]
    return []


def with_choices(cls: type, field: FieldDoc) -> FieldDoc:
    """``field`` with ``One of `a`, `b`.`` added to its description when it takes a choice."""
    if "str" not in field.type:
        return field
    values = allowed_values(cls, field.name)
    if not values:
        return field
    lead = "Each one of " if field.type.startswith("list") else "One of "
    listed = lead + ", ".join(f"``{v}``" for v in values) + "."
    return field._replace(doc=f"{field.doc} {listed}".strip())


def mentioned(cls: type, name: str) -> bool:
    """Whether the docstring of ``cls`` or of a base names the field ``name`` in code."""
    return any(re.search(rf"``{re.escape(name)}\b", _doc(klass)) for klass in cls.__mro__)


def section_class(hint: object) -> type | None:
    """The dataclass a recipe field holds (``LoraSection | None`` → ``LoraSection``), or
    ``None`` for a plain value."""
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return hint
    for arg in typing.get_args(hint):
        if dataclasses.is_dataclass(arg) and isinstance(arg, type):
            return arg
    return None


def recipe_sections(recipe_class: type) -> dict[str, type]:
    """``{field name: section dataclass}`` of a task's recipe class."""
    hints = typing.get_type_hints(recipe_class)
    sections = {}
    for field in dataclasses.fields(recipe_class):
        cls = section_class(hints[field.name])
        if cls is not None:
            sections[field.name] = cls
    return sections


ARG_LINE = re.compile(r"^(?P<names>[A-Za-z_][\w /]*):(?:\s+(?P<text>.*))?$")


def args_docs(docstring: str | None) -> dict[str, str]:
    """``{name: text}`` of the ``Args:`` block of a Google-style docstring; an entry naming
    several fields (``encoder_layers / decoder_layers: ...``) documents each of them."""
    docs: dict[str, str] = {}
    lines = inspect.cleandoc(docstring or "").splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "Args:")
    except StopIteration:
        return docs
    indent, names, text = None, [], []

    def flush():
        for name in names:
            docs[name] = " ".join(text).strip()

    for line in lines[start + 1 :]:
        if not line.strip():
            continue
        width = len(line) - len(line.lstrip())
        if indent is None:
            indent = width
        if width < indent:
            break
        match = ARG_LINE.match(line.strip()) if width == indent else None
        if match:
            flush()
            names = [n.strip() for n in match["names"].split("/")]
            text = [match["text"] or ""]
        else:
            text.append(line.strip())
    flush()
    return docs


def config_fields(config_class: type) -> list[FieldDoc]:
    """The fields a recipe's ``model:`` section may set for ``config_class``: those the class
    declares itself (the generic ``PreTrainedConfig`` ones left out), documented by the
    ``Args:`` of its docstring."""
    own = set(vars(config_class).get("__annotations__", {}))
    docs = args_docs(config_class.__doc__)
    fields = [
        FieldDoc(f.name, type_name(f.type), field_default(f), docs.get(f.name, ""))
        for f in dataclasses.fields(config_class)
        if f.name in own
    ]
    for i, f in enumerate(fields):
        if f.name in TOKENIZER_SET:
            fields[i] = f._replace(doc=f"{f.doc} {TOKENIZER_SET[f.name]}".strip())
    return [with_choices(config_class, f) for f in fields]


TOKENIZER_SET = {
    "vocab_size": "Set from the tokenizer: a recipe may not give it.",
}
"""Config fields that training sets itself
(:func:`hfattn.recipes.model_section.validate_model_section`)."""


def field_table(fields: list[FieldDoc], prefix: str) -> list[str]:
    """A Markdown table of ``fields``, each named ``prefix.field``."""
    rows = ["| field | type | default | description |", "|---|---|---|---|"]
    for f in fields:
        name = f"{prefix}.{f.name}" if prefix else f.name
        rows.append(
            f"| `{name}` | {code_cell(f.type)} | {code_cell(f.default)} | {text_cell(f.doc)} |"
        )
    return rows


# ---- the recipe reference ----------------------------------------------------------------------
def recipe_reference() -> str:
    """The Markdown of ``reference/recipes.md``."""
    from hfattn.recipes.schema import RecipeBase
    from hfattn.tasks import TASK_NAMES, get_task

    out = [
        "# Recipe reference",
        "",
        "<!-- Generated by docs/hooks/reference.py from the recipe dataclasses; do not edit. -->",
        "",
        "A recipe is one YAML file per experiment. Its `task:` picks the recipe class, and with",
        "it the sections below; every field has a default, so a recipe names only what it",
        "changes. Unknown keys, wrong types and out-of-range values stop `hfattn train` before",
        "anything is loaded, with the dotted name of the field. Any field can be overridden on",
        "the command line: `hfattn train RECIPE --set training.max_minutes=2` (`KEY=null`",
        "unsets it).",
        "",
        "This page is generated from the dataclasses each time the documentation is built:",
        "`hfattn/recipes/schema.py` holds the sections every task shares, `hfattn/tasks/<task>.py`",
        "each task's own.",
        "",
        "Tasks: "
        + ", ".join(f"[`{name}`](#{name})" for name in TASK_NAMES)
        + "; the `model:` section of each model type: [model fields](#model-fields).",
        "",
    ]
    for name in TASK_NAMES:
        recipe_class = get_task(name).recipe_class
        sections = recipe_sections(recipe_class)
        out += [f"## `task: {name}` {{ #{name} }}", ""]
        out += [f"Recipe class `{recipe_class.__name__}`. {text_cell(_doc(recipe_class))}", ""]
        out += [f"### Top-level fields {{ #{name}-top }}", ""]
        rows = ["| field | type | default | description |", "|---|---|---|---|"]
        base_docs = _first_paragraphs(RecipeBase)
        own_docs = attribute_docstrings(recipe_class)
        for f in section_fields(recipe_class):
            if f.name in sections:
                kind = f"[`{sections[f.name].__name__}`](#{name}-{f.name})"
                rows.append(f"| `{f.name}` | {kind} | {code_cell(f.default)} | the section below |")
            else:
                doc = own_docs.get(f.name) or base_docs.get(f.name, "")
                rows.append(
                    f"| `{f.name}` | {code_cell(f.type)} | {code_cell(f.default)} | "
                    f"{text_cell(doc)} |"
                )
        out += [*rows, ""]
        for field_name, cls in sections.items():
            out += [f"### `{field_name}:` {{ #{name}-{field_name} }}", ""]
            out += [f"`{cls.__name__}`. {text_cell(_doc(cls))}", ""]
            out += [*field_table(section_fields(cls), field_name), ""]
    out += _model_reference()
    return "\n".join(out) + "\n"


def _doc(cls: type) -> str:
    """The class's own docstring (not a base's), or ``""``."""
    return inspect.cleandoc(vars(cls).get("__doc__") or "")


TOP_LEVEL_DOCS = {
    "name": "The experiment's name; `output_dir` defaults to `runs/<name>`.",
    "task": "The task (one of the sections of this page), which picks the recipe class.",
    "output_dir": "The run folder: the resolved recipe, checkpoints, the training log and the "
    "saved model. `null`: `runs/<name>`.",
    "model": "`type` (a model type) with an optional `preset` and any field of its config "
    "(see [model fields](#model-fields)), or `pretrained` (a Hub id or local folder; "
    "`model: <id>` is shorthand).",
}
"""The top-level fields of :class:`hfattn.recipes.schema.RecipeBase` have no attribute docstrings;
their meaning is in the class docstring, summed up here."""


def _first_paragraphs(cls: type) -> dict[str, str]:
    """Descriptions of :class:`~hfattn.recipes.schema.RecipeBase`'s own fields: their attribute
    docstrings when they have one, else :data:`TOP_LEVEL_DOCS`."""
    docs = dict(TOP_LEVEL_DOCS)
    docs.update(attribute_docstrings(cls))
    return docs


def _model_reference() -> list[str]:
    """The ``model:`` fields of every model config class exported by :mod:`hfattn.models`."""
    from transformers import PreTrainedConfig

    import hfattn.models as models
    from hfattn.recipes.model_section import PRETRAINED_KEYS

    out = [
        "## `model:` fields by model type { #model-fields }",
        "",
        "A model built from scratch names its `type`, optionally a `preset` (a named set of",
        "fields, which the recipe's own fields override) and any field of the config class;",
        "`vocab_size` is set from the tokenizer. A pretrained model is",
        f"`model: {{{', '.join(f'{k}: ...' for k in PRETRAINED_KEYS)}}}` (or `model: <id>`),",
        "with no other key.",
        "",
    ]
    configs = [
        getattr(models, name)
        for name in models.__all__
        if isinstance(getattr(models, name), type)
        and issubclass(getattr(models, name), PreTrainedConfig)
    ]
    for config_class in sorted(configs, key=lambda c: c.model_type):
        model_type = config_class.model_type
        presets = sorted(getattr(config_class, "PRESETS", {}))
        out += [f"### `type: {model_type}` {{ #model-{model_type} }}", ""]
        summary = inspect.cleandoc(config_class.__doc__ or "").split("\n\n")[0]
        out += [f"`{config_class.__name__}`. {text_cell(_strip_md_refs(summary))}", ""]
        if presets:
            out += ["Presets: " + ", ".join(f"`{p}`" for p in presets) + ".", ""]
        out += [*field_table(config_fields(config_class), "model"), ""]
    return out


def _strip_md_refs(text: str) -> str:
    """``[`X`]`` (transformers' doc links) → ``X`` in code."""
    return re.sub(r"\[`([^`]+)`\]", r"`\1`", text)
