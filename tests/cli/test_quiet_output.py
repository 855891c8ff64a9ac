"""Cosmetics of what the commands print (issue 49, item 8): a classifier's sample ends in ``…``
only when its text was cut, a table's title stays on one line, and ``make results`` says so
when it has nothing to rewrite."""

from __future__ import annotations

from docs.hooks import results_pages, results_tables
from hfattn.commands.report import print_metrics
from hfattn.tasks.classification.job import SAMPLE_WIDTH, sample_text


def test_a_sample_ends_in_an_ellipsis_only_when_it_was_cut():
    assert sample_text("B P B T X S E P E") == "B P B T X S E P E"
    assert sample_text("Exit,\n  pursued   by a bear.") == "Exit, pursued by a bear."
    exact = "x" * SAMPLE_WIDTH
    assert sample_text(exact) == exact
    long = "word " * 40
    cut = sample_text(long)
    assert cut == " ".join(long.split())[:SAMPLE_WIDTH] + "…"
    assert len(cut) == SAMPLE_WIDTH + 1


def test_a_table_title_stays_on_one_line(capsys):
    title = "rnn_classifier_reber: evaluation (step 40)"
    print_metrics({"test": {"loss": 0.6946, "accuracy": 0.503}}, title=title)
    lines = [line.strip() for line in capsys.readouterr().out.splitlines()]
    assert lines[0] == title  # rich wraps a title to the table's width: `(step` / `40)`
    assert any("0.6946" in line for line in lines)


def test_make_results_says_when_nothing_changed(tmp_path, monkeypatch, capsys):
    page = tmp_path / "docs" / "page.md"
    page.parent.mkdir()
    start, end = results_tables.markers("figures")
    page.write_text(f"# Results\n{start}\nold\n{end}\n", "utf-8")
    monkeypatch.setattr(results_pages, "ROOT", tmp_path)
    monkeypatch.setattr(results_tables, "BLOCKS", {page: {"figures": lambda root: "new"}})
    assert results_tables.main(["--write"]) == 0
    assert capsys.readouterr().out == "rewrote docs/page.md\n"
    assert page.read_text("utf-8") == f"# Results\n{start}\nnew\n{end}\n"
    assert results_tables.main(["--write"]) == 0
    out = capsys.readouterr().out
    assert out == "docs and README already match benchmarks/results (nothing rewritten)\n"
    assert results_tables.main([]) == 0 and capsys.readouterr().out == ""
