"""MkDocs hook: the pages of the documentation that are generated, never written by hand.

Each ``mkdocs build`` (``make docs``) regenerates, from the code itself, so they cannot drift:

- ``reference/recipes.md``: every section and field of every task's recipe dataclass (name,
  type, default, the field's attribute docstring) and every field of each model config (from
  the ``Args:`` of its docstring), by :func:`recipe_reference`;
- ``reference/cli.md``: every ``hfattn`` sub-command with its arguments and help, from the
  argparse parser of :func:`hfattn.cli.build_parser`, by :func:`cli_reference`;
- the benchmark report and the charts of ``benchmarks/`` (:data:`PUBLISHED`), published in
  the site under the names given there; a docs page links them by their path in the
  repository (``../../benchmarks/RESULTS.md``), which works on GitHub as well, and
  :func:`on_page_markdown` rewrites such links to the published copies.

The functions are importable without MkDocs (``tests/docs/test_docs.py`` checks their output).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import html
import inspect
import os
import re
import textwrap
import typing
from collections.abc import Callable
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
"""The repository root (this file is ``docs/hooks/reference.py``)."""

RECIPE_PAGE = "reference/recipes.md"
CLI_PAGE = "reference/cli.md"

PUBLISHED_PAGES = {
    "benchmarks/RESULTS.md": "results/benchmark-report.md",
    "benchmarks/RESULTS_attention.md": "results/attention-benchmark.md",
    "benchmarks/NOTES.md": "results/benchmark-notes.md",
}
"""Markdown files of the repository published as site pages: repository path → page path."""
CHARTS_DIR = "benchmarks/results"
CHARTS_PAGE_DIR = "assets/benchmarks"


def published_files() -> dict[str, str]:
    """Every repository file the site publishes (repository path → path in the docs): the
    pages of :data:`PUBLISHED_PAGES` that exist and every PNG chart of ``benchmarks/results``."""
    files = {repo: page for repo, page in PUBLISHED_PAGES.items() if (REPO / repo).is_file()}
    for chart in sorted((REPO / CHARTS_DIR).glob("*.png")):
        files[f"{CHARTS_DIR}/{chart.name}"] = f"{CHARTS_PAGE_DIR}/{chart.name}"
    return files


# ---- fields and their documentation ---------------------------------------------------------
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


def format_value(value: object) -> str:
    """A default as it is written in a recipe's YAML (``null``, ``true``, ``[0.9, 0.999]``)."""
    if dataclasses.is_dataclass(value):
        return ""  # a section: its own fields have the defaults
    text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=10_000)
    return text.strip().removesuffix("...").strip()


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


# ---- Markdown helpers --------------------------------------------------------------------------
CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def text_cell(text: str) -> str:
    """Docstring text for a Markdown table cell: one line; ``<``, ``>``, ``&`` and ``|``
    escaped outside code spans; reST roles (``:class:`X```) reduced to their code span."""
    text = re.sub(r":[a-z]+:`~?\.?([^`]+)`", r"``\1``", " ".join(text.split()))
    out, last = [], 0
    for match in CODE_SPAN.finditer(text):
        out.append(html.escape(text[last : match.start()], quote=False).replace("|", "\\|"))
        out.append(f"`{match[2].strip('`')}`")
        last = match.end()
    out.append(html.escape(text[last:], quote=False).replace("|", "\\|"))
    return "".join(out)


def code_cell(text: str) -> str:
    """``text`` as a code span in a table cell."""
    return f"`{text}`" if text else ""


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


# ---- the CLI reference -------------------------------------------------------------------------
def subcommands(parser: argparse.ArgumentParser, prefix: str = "hfattn") -> dict[str, tuple]:
    """``{"hfattn train": (parser, help), ...}``: every sub-command of ``parser``, nested ones
    included, in the parser's order."""
    found: dict[str, tuple] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                found[f"{prefix} {name}"] = (sub, helps.get(name) or "")
                found.update(subcommands(sub, f"{prefix} {name}"))
    return found


def _argument_rows(parser: argparse.ArgumentParser) -> list[str]:
    formatter = parser._get_formatter()
    rows = ["| argument | default | description |", "|---|---|---|"]
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        invocation = formatter._format_action_invocation(action)
        default = action.default
        shown = (
            ""
            if default in (None, False, argparse.SUPPRESS) or action.option_strings == []
            else code_cell(format_value(default))
        )
        help_text = formatter._expand_help(action) if action.help else ""
        rows.append(f"| `{invocation}` | {shown} | {text_cell(help_text)} |")
    return rows


def cli_reference(parser: argparse.ArgumentParser | None = None) -> str:
    """The Markdown of ``reference/cli.md``, from ``parser`` (default: hfattn's)."""
    if parser is None:
        from hfattn.cli import build_parser

        parser = build_parser()
    commands = subcommands(parser)
    out = [
        "# Command-line reference",
        "",
        "<!-- Generated by docs/hooks/reference.py from hfattn's argparse parser; do not edit. -->",
        "",
        f"{text_cell(parser.description or '')} The command is `hfattn` (a console script) or",
        "`python -m hfattn`; `accelerate launch ... -m hfattn train ...` and `torchrun ... -m",
        "hfattn train ...` run training on several processes (the options that keep `accelerate",
        "launch` quiet: [training](../training.md)). `-v` / `--verbose` goes before or after",
        "the sub-command. This page is generated from the parser",
        "(`hfattn/cli.py`, `hfattn/commands/<command>.py`) each time the documentation is built.",
        "",
        "```text",
        parser.format_usage().strip(),
        "```",
        "",
        *_argument_rows(parser),
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    for name, (_, help_text) in commands.items():
        out.append(f"| [`{name}`](#{_anchor(name)}) | {text_cell(help_text)} |")
    out.append("")
    for name, (sub, help_text) in commands.items():
        out += [f"## `{name}` {{ #{_anchor(name)} }}", ""]
        if help_text:
            out += [text_cell(help_text[0].upper() + help_text[1:]) + ".", ""]
        if sub.description:
            out += [text_cell(sub.description), ""]
        out += ["```text", sub.format_usage().strip(), "```", ""]
        out += [*_argument_rows(sub), ""]
    return "\n".join(out) + "\n"


def _anchor(command: str) -> str:
    return command.replace(" ", "-")


# ---- MkDocs events -----------------------------------------------------------------------------
GENERATED_PAGES: dict[str, Callable[[], str]] = {
    RECIPE_PAGE: recipe_reference,
    CLI_PAGE: cli_reference,
}
"""The pages generated at each build (path in the docs → the function writing it)."""


def on_files(files, config):
    """Add the generated pages and the published repository files to the site."""
    from mkdocs.structure.files import File

    for src_uri, generate in GENERATED_PAGES.items():
        files.append(File.generated(config, src_uri, content=generate()))
    for repo_path, src_uri in published_files().items():
        files.append(File.generated(config, src_uri, abs_src_path=str(REPO / repo_path)))
    return files


LINK = re.compile(
    r"(?P<bang>!?)\[(?P<text>[^\]]*)\]\((?P<target>[^)\s#]*)(?P<anchor>#[^)\s]*)?"
    r'(?P<title>\s+"[^"]*")?\)'
)
"""An inline Markdown link or image: ``[text](target#anchor "title")``."""


def rewrite_links(
    markdown: str, origin_dir: Path, page_dir: str, published: dict[str, str], unlink_others: bool
) -> str:
    """Point every relative link of ``markdown`` (a page whose source lies in ``origin_dir``,
    published at ``page_dir`` of the docs) that reaches a published repository file at its
    published copy. With ``unlink_others``, a link to any other file outside ``docs/`` (which
    the site does not have) becomes its text followed by the file's repository path."""
    docs_dir = REPO / "docs"

    def replace(match: re.Match) -> str:
        target = match["target"]
        if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
            return match[0]
        path = Path(os.path.normpath(origin_dir / target))
        if path.is_relative_to(docs_dir) or not path.is_relative_to(REPO):
            return match[0]
        repo_path = path.relative_to(REPO).as_posix()
        if repo_path in published:
            new = os.path.relpath(published[repo_path], page_dir or ".").replace(os.sep, "/")
            return (
                f"{match['bang']}[{match['text']}]({new}{match['anchor'] or ''}"
                f"{match['title'] or ''})"
            )
        if unlink_others and not match["bang"]:
            return f"{match['text']} (`{repo_path}`)"
        return match[0]

    return LINK.sub(replace, markdown)


def on_page_markdown(markdown, page, config, files):
    """Rewrite links to published repository files (see :func:`rewrite_links`)."""
    published = published_files()
    src = Path(page.file.abs_src_path) if page.file.abs_src_path else None
    if src is None:  # a generated reference page: no links outside the docs
        return markdown
    is_repo_page = not src.is_relative_to(REPO / "docs")
    page_dir = os.path.dirname(page.file.src_uri)
    return rewrite_links(markdown, src.parent, page_dir, published, unlink_others=is_repo_page)
