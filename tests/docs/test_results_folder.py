"""``benchmarks/results/`` holds only what is read: each of its files is read by
``docs/hooks/results_tables.py`` (the published tables and paragraphs), named by a test, or
named by a page (the README, ``docs/``, the benchmark pages that the site publishes). A file
that nothing reads fails here with its name: an exploratory run stays out of the tree (git
keeps what was committed)."""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path
from unittest import mock

from docs.hooks import (
    data_scale_block,
    feed_block,
    gpu_blocks,
    headline_table,
    results_figures,
    results_tables,
    speed_paragraphs,
    sweep_block,
)
from docs.hooks.reference import PUBLISHED_PAGES

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"


TOKEN = re.compile(r"[\w.-]+")
"""A file name as a page or a test writes it (a link's or a path's last part included)."""

LACKING_PROVENANCE = {
    "rnn_export_cpu.json",
    speed_paragraphs.GPU_BENCH,  # names its GPU only (speed_paragraphs.gpu_machine)
}
"""The JSON results files that record no ``provenance`` block (commit, command, machine)."""


def files_in(folder: Path = RESULTS) -> list[str]:
    """The names of the files of ``folder`` that git tracks: all but those that a
    ``benchmarks/results/`` pattern of the repository's ``.gitignore`` matches."""
    prefix = "benchmarks/results/"
    ignored = [
        line.strip().removeprefix(prefix)
        for line in (REPO / ".gitignore").read_text("utf-8").splitlines()
        if line.strip().startswith(prefix)
    ]
    return sorted(
        p.name
        for p in folder.iterdir()
        if p.is_file() and not any(fnmatch.fnmatch(p.name, pattern) for pattern in ignored)
    )


def read_by_tables(root: Path = RESULTS) -> set[str]:
    """The files of ``root`` that rendering every generated block of
    :data:`results_tables.BLOCKS` reads (every figure, machine and printed table)."""
    read: set[str] = set()
    read_text = Path.read_text

    def recording(path: Path, *args, **kwargs):
        if path.parent == root:
            read.add(path.name)
        return read_text(path, *args, **kwargs)

    with mock.patch.object(Path, "read_text", recording):
        for page in results_tables.BLOCKS:
            results_tables.rendered(page, root)
    return read


def pages() -> list[Path]:
    """The README, every page of ``docs/`` and the repository files the site publishes
    (``PUBLISHED_PAGES`` of ``docs/hooks/reference.py``: the benchmark report, notes, ...)."""
    published = [REPO / path for path in PUBLISHED_PAGES]
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md")), *published]


def named_in(paths) -> set[str]:
    """Every file name written in full in the files ``paths`` (that exist)."""
    names: set[str] = set()
    for path in paths:
        if path.is_file():
            names.update(TOKEN.findall(path.read_text("utf-8")))
    return names


def suite_modules() -> list[Path]:
    """The test modules, this one left out (its names are no reader)."""
    return [p for p in sorted((REPO / "tests").rglob("*.py")) if p != Path(__file__).resolve()]


def unread_files(names, read) -> list[str]:
    """The names of ``names`` that are not in ``read``, sorted."""
    return sorted(set(names) - set(read))


def test_every_results_file_is_read_by_a_table_a_test_or_a_page():
    read = read_by_tables() | named_in(suite_modules()) | named_in(pages())
    unread = unread_files(files_in(), read)
    assert unread == [], (
        f"{len(unread)} file(s) of benchmarks/results/ read by no table, test or page "
        f"(cite them or remove them): {', '.join(unread)}"
    )


def test_the_tables_read_every_file_they_cite():
    figures = [f for row in headline_table.ROWS for f in row.figures.values()]
    for group in (speed_paragraphs.SPEED_FIGURES, speed_paragraphs.GPU_FIGURES):
        figures += list(group.values())
    figures += list(feed_block.FEED_FIGURES.values())
    cited = set(results_figures.figure_files(figures)) | {results_tables.ATTENTION_VARIANTS}
    cited |= {path.name for path in speed_paragraphs.speedrun_files(RESULTS)}
    cited |= set(gpu_blocks.block_files(RESULTS)) | set(sweep_block.block_files(RESULTS))
    if (RESULTS / data_scale_block.DATA_SCALE).is_file():  # optional: a page says when missing
        cited.add(data_scale_block.DATA_SCALE)
    assert read_by_tables() == cited
    assert {speed_paragraphs.GPU_BENCH, "scores_date_normalization.md", "bench_feed.json"} <= cited


def test_an_added_unread_file_is_listed(tmp_path):
    root = tmp_path / "results"
    root.mkdir()
    for name in files_in():
        (root / name).write_bytes((RESULTS / name).read_bytes())
    (root / "bahdanau_bible_tgt_heap_repeat_beam4.json").write_text("{}", "utf-8")
    (root / "space_load_quick.json").write_text("{}", "utf-8")  # .gitignore: *_quick.*
    read = read_by_tables(root) | named_in(suite_modules()) | named_in(pages())
    assert unread_files(files_in(root), read) == ["bahdanau_bible_tgt_heap_repeat_beam4.json"]
    assert unread_files(["a.json", "b.png"], {"b.png", "c.json"}) == ["a.json"]


def test_a_page_names_a_file_by_its_whole_name(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "![chart](../../benchmarks/results/attention_mha_seq_len_cpu.png) and "
        "`results/bench_feed.json`; the `*_loss_curve.png` of each run\n",
        "utf-8",
    )
    names = named_in([page])
    assert {"attention_mha_seq_len_cpu.png", "bench_feed.json"} <= names
    assert "bench_feed" not in names  # a name counts only whole
    assert not any(name.endswith("_loss_curve.png") and name != "_loss_curve.png" for name in names)


def test_each_json_results_file_records_its_provenance():
    lacking = set()
    for name in files_in():
        if not name.endswith(".json"):
            continue
        data = json.loads((RESULTS / name).read_text("utf-8"))
        training = data.get("training") if isinstance(data.get("training"), dict) else {}
        if not (data.get("provenance") or training.get("provenance")):
            lacking.add(name)
    assert lacking == LACKING_PROVENANCE


NOTES = REPO / "benchmarks" / "NOTES.md"
NOTES_MAX_LINES = 400
DATE = re.compile(r"\b(19|20)\d{2}-\d{2}-\d{2}\b")
"""An ISO date (a dated diary entry)."""


def test_the_methods_page_is_short_and_undated():
    lines = NOTES.read_text("utf-8").splitlines()
    assert len(lines) <= NOTES_MAX_LINES, len(lines)
    dated = [f"{n}: {line}" for n, line in enumerate(lines, 1) if DATE.search(line)]
    assert dated == []
