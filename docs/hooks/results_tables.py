"""The published results tables, rendered from the files of ``benchmarks/results/``.

Every figure of the README's headline table, of its speed and GPU paragraphs, of the docs'
results page (``docs/results/index.md``), of the attention-variants table of
``docs/models/bahdanau.md``, of the GPU feed of ``docs/training.md`` and of the large corpora
of ``docs/tasks/causal-lm.md`` and ``docs/tasks/translation.md`` is read here from the results
file that measured it; what no file holds (the command) is written once in
:data:`headline_table.ROWS`, :data:`speed_paragraphs.SPEED` and
:data:`speed_paragraphs.GPU_SPEED`.
``make results`` (``python -m docs.hooks.results_tables --write``, from the repository root)
rewrites the README and those pages between their ``<!-- results:NAME:start -->`` /
``<!-- results:NAME:end -->``
markers; ``--check`` (and ``tests/docs/test_results_tables.py``) fails when a table and its files
disagree or a cited file is missing.

The blocks are rendered by one module each: :mod:`headline_table`, :mod:`speed_paragraphs`,
:mod:`feed_block`, :mod:`data_scale_block`, :mod:`gpu_blocks` and :mod:`sweep_block`, from the
figures of :mod:`results_figures`; this module registers them by page (:data:`BLOCKS`) and
rewrites or checks the pages.

No torch import (only :mod:`hfattn.common.machine`, standard library only): the docs build and the
tests read this module in a light process.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hfattn.storage.file_io import atomic_write_text

if __package__:  # docs.hooks.results_tables (tests, python -m)
    from . import results_pages as pages
    from .data_scale_block import data_scale_block
    from .feed_block import feed_block
    from .gpu_blocks import candidates_block, compile_block
    from .headline_table import README_COLUMNS, markdown_table, results_page_table
    from .speed_paragraphs import gpu_paragraph, speed_paragraph, speedrun_paragraph
    from .sweep_block import option_effects_block, sweep_block
else:  # MkDocs loads a hook with its folder on the path
    import results_pages as pages
    from data_scale_block import data_scale_block
    from feed_block import feed_block
    from gpu_blocks import candidates_block, compile_block
    from headline_table import README_COLUMNS, markdown_table, results_page_table
    from speed_paragraphs import gpu_paragraph, speed_paragraph, speedrun_paragraph
    from sweep_block import option_effects_block, sweep_block

SMALL_CORPUS_RECIPE = "vaswani_bible_en_es"
"""The recipe whose sweep measures the options of a small corpus (the translation page's
"Small corpora" and the benchmark notes)."""


def readme_table(root: Path = pages.RESULTS) -> str:
    """The README's headline table, speed paragraph, GPU paragraph and time to quality."""
    return "\n\n".join(
        (
            markdown_table(README_COLUMNS, root),
            speed_paragraph("docs/", root),
            gpu_paragraph(root),
            speedrun_paragraph(root),
        )
    )


ATTENTION_VARIANTS = "scores_date_normalization.md"
"""The attention variants on the date normalisation recipe (``benchmarks/bench_scores.py``)."""


def printed_table(file: str, root: Path = pages.RESULTS) -> str:
    """The Markdown table a benchmark script printed into ``file`` (its lines that start
    with ``|``).

    Raises:
        FileNotFoundError: the file is missing.
        KeyError: the file holds no table.
    """
    path = root / file
    if not path.is_file():
        raise FileNotFoundError(f"results file missing: {path}")
    lines = [line for line in path.read_text("utf-8").splitlines() if line.startswith("|")]
    if not lines:
        raise KeyError(f"{file}: no table")
    return "\n".join(lines)


SMALL_CORPUS_BLOCK = {
    "small-corpus-options": lambda root: option_effects_block(root, SMALL_CORPUS_RECIPE)
}
"""The options of a small corpus measured by the sweep of :data:`SMALL_CORPUS_RECIPE`."""

BLOCKS = {
    pages.README: {"headline": readme_table},
    pages.RESULTS_PAGE: {
        "headline": results_page_table,
        "speed": lambda root: speed_paragraph("../", root),
        "gpu": lambda root: "\n\n".join((gpu_paragraph(root), speedrun_paragraph(root))),
    },
    pages.BAHDANAU_PAGE: {
        "attention-variants": lambda root: printed_table(ATTENTION_VARIANTS, root)
    },
    pages.TRAINING_PAGE: {
        "feed": feed_block,
        "speedrun": speedrun_paragraph,
        "compile": compile_block,
        "candidates": candidates_block,
    },
    pages.SWEEPS_PAGE: {
        "example": sweep_block,
        "small-corpus": lambda root: sweep_block(root, SMALL_CORPUS_RECIPE),
    },
    pages.NOTES: SMALL_CORPUS_BLOCK,
    pages.CAUSAL_LM_PAGE: {
        "large-corpora": lambda root: data_scale_block(pages.CAUSAL_LM_PAGE, root)
    },
    pages.TRANSLATION_PAGE: {
        "large-corpora": lambda root: data_scale_block(pages.TRANSLATION_PAGE, root),
        **SMALL_CORPUS_BLOCK,
    },
}
"""The generated blocks of each file, by marker name."""


def markers(name: str) -> tuple[str, str]:
    """The start and end markers of the generated block ``name`` in a page."""
    return f"<!-- results:{name}:start -->", f"<!-- results:{name}:end -->"


def replace_block(text: str, name: str, body: str) -> str:
    """``text`` with the block between ``name``'s markers replaced by ``body``.

    Raises:
        ValueError: a marker is missing.
    """
    start, end = markers(name)
    if start not in text or end not in text:
        raise ValueError(f"markers {start} / {end} missing")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{body}\n{end}{tail}"


def render_blocks(text: str, path: Path, root: Path = pages.RESULTS) -> str:
    """``text`` (the content of ``path``, one of :data:`BLOCKS`) with its generated blocks
    rendered from the files under ``root``; the docs build renders each page so
    (``docs/hooks/results.py``)."""
    for name, render in BLOCKS[path].items():
        text = replace_block(text, name, render(root))
    return text


def rendered(path: Path, root: Path = pages.RESULTS) -> str:
    """``path``'s text with its generated blocks rendered from the files under ``root``."""
    return render_blocks(path.read_text("utf-8"), path, root)


def render_page(markdown: str, src_path: str | None) -> str:
    """A docs page's ``markdown`` with its results blocks rendered, when ``src_path`` (the page's
    file) is a page of :data:`BLOCKS`; else ``markdown`` as it is (``docs/hooks/results.py``
    calls it on every page of the build)."""
    path = Path(src_path).resolve() if src_path else None
    if path not in BLOCKS:
        return markdown
    return render_blocks(markdown, path)


def stale_files(root: Path = pages.RESULTS) -> list[Path]:
    """The files whose generated blocks differ from what their results files give."""
    return [path for path in BLOCKS if rendered(path, root) != path.read_text("utf-8")]


def main(argv: list[str] | None = None) -> int:
    """``--write`` (``make results``): rewrite the generated blocks that differ from what
    ``benchmarks/results/`` gives, one line per file, or one line saying that none differs;
    without it: name each stale file, exit status 1 when there is one."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the generated blocks")
    args = parser.parse_args(argv)
    if args.write:
        rewritten = 0
        for path in BLOCKS:
            new = rendered(path)
            if new != path.read_text("utf-8"):
                atomic_write_text(path, new)
                print(f"rewrote {path.relative_to(pages.ROOT)}")
                rewritten += 1
        if not rewritten:
            print("docs and README already match benchmarks/results (nothing rewritten)")
        return 0
    stale = stale_files()
    for path in stale:
        print(
            f"{path.relative_to(pages.ROOT)}: tables differ from benchmarks/results/ (make results)"
        )
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
