"""MkDocs hook: the pages of the documentation that are generated, never written by hand.

Each ``mkdocs build`` (``make docs``) regenerates, from the code itself, so they cannot drift:

- ``reference/recipes.md``: every section and field of every task's recipe dataclass (name,
  type, default, the field's attribute docstring) and every field of each model config (from
  the ``Args:`` of its docstring), by :func:`reference_recipes.recipe_reference`;
- ``reference/cli.md``: every ``hfattn`` sub-command with its arguments and help, from the
  argparse parser of :func:`hfattn.cli.build_parser`, by :func:`reference_cli.cli_reference`;
- the benchmark report and the charts of ``benchmarks/`` (:data:`PUBLISHED`), published in
  the site under the names given there; a docs page links them by their path in the
  repository (``../../benchmarks/RESULTS.md``), which works on GitHub as well, and
  :func:`on_page_markdown` rewrites such links to the published copies.

The functions are importable without MkDocs (``tests/docs/test_docs.py`` checks their output);
MkDocs loads this hook with its folder on the path, where the modules it imports lie.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

if __name__ == "docs.hooks.reference":  # imported from the package (tests)
    from .reference_cli import cli_reference
    from .reference_recipes import recipe_reference
else:  # MkDocs loads a hook by its path (its __package__ made of that path), folder on sys.path
    from reference_cli import cli_reference
    from reference_recipes import recipe_reference

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
