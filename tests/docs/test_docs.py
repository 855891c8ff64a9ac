"""The documentation's sources: the generated references, the results tables, the README's
length and every relative link of ``README.md`` and ``docs/`` (the strict MkDocs build is
checked in ``test_docs_browser.py``, which builds the site once for its browser tests)."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import re
import sys
import typing
from pathlib import Path

import pytest

from docs.hooks import reference_cells, reference_recipes, results_tables

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
README_MAX_LINES = 200


def _load_hook(file: str = "reference.py"):
    """``docs/hooks/<file>`` as a module, loaded as MkDocs loads it: by path, not as a package,
    with its folder on the path while it runs (it imports the modules beside it)."""
    name = f"docs_hook_{file.removesuffix('.py')}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, DOCS / "hooks" / file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(DOCS / "hooks"))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(DOCS / "hooks"))
    return module


@pytest.fixture(scope="module")
def hook():
    return _load_hook()


# ---- the results tables --------------------------------------------------------------------------
def test_the_build_renders_the_results_tables_from_their_files():
    """What ``docs/hooks/results.py`` does to each page of the build."""
    page = DOCS / "results" / "index.md"
    text = page.read_text(encoding="utf-8")
    start, end = "<!-- results:headline:start -->", "<!-- results:headline:end -->"
    head, rest = text.split(start, 1)
    stale = f"{head}{start}\n| a stale table |\n{end}{rest.split(end, 1)[1]}"
    built = results_tables.render_page(stale, str(page))
    assert "| a stale table |" not in built
    assert built == results_tables.rendered(page)
    assert results_tables.render_page(stale, str(DOCS / "index.md")) == stale  # not a results page


# ---- the recipe reference -----------------------------------------------------------------------
def _block(markdown: str, anchor: str) -> str:
    """The text under the heading with ``{ #anchor }``, up to the next heading of its level."""
    match = re.search(rf"^(#+) .*\{{ #{re.escape(anchor)} \}}$", markdown, re.M)
    assert match, f"no heading with anchor #{anchor}"
    level = len(match[1])
    rest = markdown[match.end() :]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.M)
    return rest[: end.start()] if end else rest


def _section_types(recipe_class: type) -> dict[str, type]:
    """``{field: dataclass}`` of a recipe class, unwrapping ``X | None``."""
    found = {}
    for name, hint in typing.get_type_hints(recipe_class).items():
        for candidate in (hint, *typing.get_args(hint)):
            if isinstance(candidate, type) and dataclasses.is_dataclass(candidate):
                found[name] = candidate
    return found


def test_recipe_reference_lists_every_field_of_every_section(hook):
    from hfattn.tasks import TASK_NAMES, get_task

    markdown = hook.recipe_reference()
    checked = 0
    for task in TASK_NAMES:
        recipe_class = get_task(task).recipe_class
        top = _block(markdown, f"{task}-top")
        for field in dataclasses.fields(recipe_class):
            assert f"| `{field.name}` |" in top, (task, field.name)
        sections = _section_types(recipe_class)
        assert {"training", "data", "hub"} <= set(sections)
        for section, cls in sections.items():
            block = _block(markdown, f"{task}-{section}")
            for field in dataclasses.fields(cls):
                assert f"| `{section}.{field.name}` |" in block, (task, section, field.name)
                checked += 1
    assert checked > 100


def test_recipe_reference_lists_every_model_config_field(hook):
    from transformers import PreTrainedConfig

    import hfattn.models as models

    markdown = hook.recipe_reference()
    configs = [
        getattr(models, n)
        for n in models.__all__
        if isinstance(getattr(models, n), type) and issubclass(getattr(models, n), PreTrainedConfig)
    ]
    assert {c.model_type for c in configs} == {"char-rnn", "bahdanau", "vaswani", "rnn-classifier"}
    for config in configs:
        block = _block(markdown, f"model-{config.model_type}")
        own = [
            f.name for f in dataclasses.fields(config) if f.name in vars(config)["__annotations__"]
        ]
        assert own
        for name in own:
            assert f"| `model.{name}` |" in block, (config.model_type, name)


def test_recipe_reference_shows_docstrings_defaults_and_choices(hook):
    markdown = hook.recipe_reference()
    row = next(
        line
        for line in _block(markdown, "translation-training").splitlines()
        if line.startswith("| `training.metric_for_best_model` |")
    )
    assert "| `loss` |" in row and "best checkpoint" in row
    optimizer = next(line for line in markdown.splitlines() if "`training.optimizer`" in line)
    assert all(
        f"`{name}`" in optimizer for name in ("adamw", "nadam", "rmsprop", "radam", "sgd", "muon")
    )
    cell = next(
        line for line in _block(markdown, "model-char-rnn").splitlines() if "`model.cell`" in line
    )
    assert "`gru`" in cell and "`lstm`" in cell and "`rnn`" in cell


@dataclasses.dataclass
class _Base:
    documented: int = 1
    """Documented in the base."""
    bare: str = "x"


@dataclasses.dataclass
class _Child(_Base):
    documented: int = 2
    extra: list[str] = dataclasses.field(default_factory=lambda: ["a"])
    """The child's own field."""
    optional: float | None = None


def test_attribute_docstrings_are_found_through_the_bases_and_bare_fields_are_listed():
    docs = reference_recipes.attribute_docstrings(_Child)
    assert docs == {"documented": "Documented in the base.", "extra": "The child's own field."}
    rows = reference_recipes.section_fields(_Child)
    assert [(r.name, r.type, r.default) for r in rows] == [
        ("documented", "int", "2"),
        ("bare", "str", "x"),
        ("extra", "list[str]", "[a]"),
        ("optional", "float | None", "null"),
    ]
    assert [r.doc for r in rows] == ["Documented in the base.", "", "The child's own field.", ""]


def test_args_docstrings_name_each_field_of_a_shared_entry():
    doc = """Config.

    Args:
        size: the width,
            over two lines.
        encoder_layers / decoder_layers: ``N`` of each stack.

    Returns nothing.
    """
    assert reference_recipes.args_docs(doc) == {
        "size": "the width, over two lines.",
        "encoder_layers": "``N`` of each stack.",
        "decoder_layers": "``N`` of each stack.",
    }


# ---- the CLI reference --------------------------------------------------------------------------
def _all_commands(parser: argparse.ArgumentParser, prefix: str = "hfattn"):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prefix} {name}", sub
                yield from _all_commands(sub, f"{prefix} {name}")


def test_cli_reference_lists_every_subcommand_and_option(hook):
    from hfattn.cli import COMMANDS, build_parser

    parser = build_parser()
    markdown = hook.cli_reference(parser)
    commands = dict(_all_commands(parser))
    assert {f"hfattn {c}" for c in COMMANDS} <= set(commands)
    for name, sub in commands.items():
        block = _block(markdown, name.replace(" ", "-"))
        for action in sub._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert option in block, (name, option)
            if not action.option_strings and action.help:
                assert reference_cells.text_cell(action.help)[:30] in block, (name, action.dest)


def test_cli_reference_follows_nested_subcommands(hook):
    parser = argparse.ArgumentParser(prog="hfattn", description="Top.")
    outer = parser.add_subparsers().add_parser("plot", help="draw")
    inner = outer.add_subparsers().add_parser("noam", help="the Noam schedule")
    inner.add_argument("--warmup", type=int, default=4000, help="warmup <steps> | ratio")
    markdown = hook.cli_reference(parser)
    block = _block(markdown, "hfattn-plot-noam")
    assert "`--warmup WARMUP`" in block and "`4000`" in block
    assert "warmup &lt;steps&gt; \\| ratio" in block


# ---- README and links ---------------------------------------------------------------------------
def test_readme_is_at_most_200_lines():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, len(lines)


PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
PIPELINE_TASK = re.compile(r"\bpipeline\(\s*[\"']([^\"']+)[\"']")


def test_the_pipelines_of_the_readme_and_the_docs_exist_and_the_readme_shows_translation():
    """Every ``pipeline("TASK", ...)`` of a Python block of the README and the docs names a
    task that transformers accepts once ``import hfattn.models`` ran (transformers 5 has no
    ``"translation"``: a ``KeyError``); the README shows the translation one,
    ``"hfattn-translation"``, not only the docs."""
    from transformers.pipelines import check_task

    import hfattn.models  # noqa: F401  (registers "hfattn-translation")
    from hfattn.models import TranslationPipeline

    tasks = {}
    for page in [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]:
        for block in PYTHON_BLOCK.findall(page.read_text(encoding="utf-8")):
            for task in PIPELINE_TASK.findall(block):
                tasks.setdefault(task, []).append(page.relative_to(REPO).as_posix())
    unknown = {}
    for task, pages in tasks.items():
        try:
            check_task(task)
        except KeyError as err:
            unknown[task] = (pages, str(err)[:80])
    assert unknown == {}
    readme = "\n".join(PYTHON_BLOCK.findall((REPO / "README.md").read_text(encoding="utf-8")))
    translation = [
        task
        for task in PIPELINE_TASK.findall(readme)
        if check_task(task)[1]["impl"] is TranslationPipeline
    ]
    assert translation == ["hfattn-translation"], PIPELINE_TASK.findall(readme)


LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE = re.compile(r"(`+).+?\1", re.S)


def relative_links(markdown: str) -> list[str]:
    """The relative link and image targets of ``markdown`` (code blocks and spans, URLs and
    in-page anchors left out), without their ``#anchor``."""
    text = CODE.sub("", FENCE.sub("", markdown))
    targets = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
            continue
        targets.append(target.split("#")[0])
    return [t for t in targets if t]


def broken_links(path: Path, generated: set[str]) -> list[str]:
    """The relative links of the Markdown file ``path`` that reach no file (a docs page may
    also link a page the docs build generates)."""
    broken = []
    for target in relative_links(path.read_text(encoding="utf-8")):
        resolved = Path(os.path.normpath(path.parent / target))
        if resolved.exists():
            continue
        if resolved.is_relative_to(DOCS) and resolved.relative_to(DOCS).as_posix() in generated:
            continue
        broken.append(target)
    return broken


def test_every_relative_link_of_the_readme_and_the_docs_resolves(hook):
    generated = set(hook.GENERATED_PAGES)
    pages = [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]
    assert len(pages) > 15
    broken = {str(p.relative_to(REPO)): broken_links(p, generated) for p in pages}
    assert {page: links for page, links in broken.items() if links} == {}
    readme_links = relative_links((REPO / "README.md").read_text(encoding="utf-8"))
    assert sum(link.startswith("docs/") for link in readme_links) >= 10


def test_the_link_check_finds_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("x", encoding="utf-8")
    page.write_text(
        "[ok](there.md#a) [web](https://example.org) `[code](gone.md)` "
        "![img](missing.png) [gone](gone.md)\n\n```\n[fenced](gone2.md)\n```\n",
        encoding="utf-8",
    )
    assert broken_links(page, set()) == ["missing.png", "gone.md"]


SOURCE_PATH = re.compile(
    r"`((?:hfattn|benchmarks|tests|recipes|spaces)/[\w/.<>-]+\.(?:py|yaml|md|sh))`"
)


def named_source_paths(markdown: str) -> list[str]:
    """The repository files a page names in code spans (``hfattn/recipes/parsing.py``), leaving
    out placeholders (``hfattn/tasks/<task>/job.py``, the guides' ``my_task``)."""
    return [p for p in SOURCE_PATH.findall(markdown) if "<" not in p and "my_task" not in p]


def test_every_source_file_the_docs_name_exists():
    """The guides and pages name modules as they are: a renamed or removed module fails here."""
    pages = [REPO / "README.md", REPO / "benchmarks" / "NOTES.md", *sorted(DOCS.rglob("*.md"))]
    missing = {}
    for page in pages:
        gone = [
            p
            for p in named_source_paths(page.read_text(encoding="utf-8"))
            if not (REPO / p).exists()
        ]
        if gone:
            missing[str(page.relative_to(REPO))] = gone
    assert missing == {}
    guide = (DOCS / "guides" / "recipe-to-loss.md").read_text(encoding="utf-8")
    found = named_source_paths("`hfattn/recipes/loading.py` and `hfattn/tasks/<task>/job.py`")
    assert found == ["hfattn/recipes/loading.py"] and not (REPO / found[0]).exists()
    assert len(named_source_paths(guide)) >= 8
