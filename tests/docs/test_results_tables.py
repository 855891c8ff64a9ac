"""The published tables (README headline, docs/results/index.md, the attention variants of
docs/models/bahdanau.md, the GPU feed of docs/training.md) are the rendering of the
files in benchmarks/results/: a table that disagrees with its files, or a cited file that is
missing, fails here (``make results`` rewrites the tables)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from docs.hooks import (
    data_scale_block,
    feed_block,
    gpu_blocks,
    headline_table,
    results_figures,
    results_pages,
    results_tables,
    speed_paragraphs,
    sweep_block,
)
from docs.hooks.data_scale_block import DATA_SCALE
from docs.hooks.feed_block import FEED, FEED_FIGURES
from docs.hooks.headline_table import ROWS
from docs.hooks.results_pages import (
    BAHDANAU_PAGE,
    CAUSAL_LM_PAGE,
    README,
    RESULTS,
    RESULTS_PAGE,
    TRAINING_PAGE,
    TRANSLATION_PAGE,
)
from docs.hooks.results_tables import ATTENTION_VARIANTS
from docs.hooks.speed_paragraphs import GPU_FIGURES, SPEED_FIGURES


def cited_files() -> set[str]:
    """The files the tables read; the large corpora's (optional) when it exists."""
    figures = [f for row in ROWS for f in row.figures.values()]
    figures += list(SPEED_FIGURES.values()) + list(GPU_FIGURES.values())
    figures += list(FEED_FIGURES.values())
    optional = {DATA_SCALE} if (RESULTS / DATA_SCALE).is_file() else set()
    speedruns = {path.name for path in speed_paragraphs.speedrun_files()}
    speedruns |= set(gpu_blocks.block_files(RESULTS)) | set(sweep_block.block_files(RESULTS))
    return {figure.file for figure in figures} | {ATTENTION_VARIANTS} | optional | speedruns


def test_every_cited_file_exists_and_holds_its_figure():
    for name in sorted(cited_files()):
        assert (RESULTS / name).is_file(), name
    for row in ROWS:
        assert all(isinstance(v, (int, float)) for v in row.values().values()), row.recipe
    for name, figure in SPEED_FIGURES.items():
        assert isinstance(figure.read(), (int, float)), name
    for name, figure in GPU_FIGURES.items():
        assert isinstance(figure.read(), str if name == "peak" else (int, float)), name
    for name, figure in FEED_FIGURES.items():
        assert isinstance(figure.read(), list if name.endswith("/shapes") else (int, float)), name


def test_the_gpu_figures_are_read_from_their_files_lists_included(tmp_path):
    root = copy_results(tmp_path)
    bench = root / speed_paragraphs.GPU_BENCH
    data = json.loads(bench.read_text("utf-8"))
    assert GPU_FIGURES["v_mfu"].read(root) == data["training"][0]["hfattn"]["mfu"]
    paragraph = speed_paragraphs.gpu_paragraph(root)
    assert f"an MFU of {data['training'][0]['hfattn']['mfu']:.1%}" in paragraph
    data["training"][0]["hfattn"]["mfu"] = 0.4321
    bench.write_text(json.dumps(data), "utf-8")
    assert "an MFU of 43.2%" in speed_paragraphs.gpu_paragraph(root)
    assert README in results_tables.stale_files(root)
    assert RESULTS_PAGE in results_tables.stale_files(root)


def test_the_published_tables_are_those_their_files_give():
    assert results_tables.stale_files() == [], "run `make results`"
    assert TRAINING_PAGE in results_tables.BLOCKS
    assert feed_block.feed_block() in TRAINING_PAGE.read_text("utf-8")
    for path in (README, RESULTS_PAGE):
        for row in ROWS:
            assert row.result.format(**row.values()) in path.read_text("utf-8"), (path, row)


def copy_results(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    root.mkdir()
    for name in cited_files():
        shutil.copy(RESULTS / name, root / name)
    return root


def test_a_changed_figure_makes_the_tables_stale(tmp_path):
    root = copy_results(tmp_path)
    assert results_tables.stale_files(root) == []
    path = root / "baseline_genre_tfidf_nb_eval_results.json"
    data = json.loads(path.read_text())
    for result in data["results"]:
        if result["split"] == "test" and result["metric_type"] == "macro_f1":
            result["value"] += 0.01
    path.write_text(json.dumps(data))
    assert results_tables.stale_files(root) == [README, RESULTS_PAGE]
    assert results_tables.main([]) == 0  # the real files still agree


def test_the_attention_variants_table_is_the_one_its_benchmark_printed(tmp_path):
    page = BAHDANAU_PAGE.read_text("utf-8")
    assert "| Luong, dot | 1.000 ± 0.000 | 1.000, 1.000, 1.000 | 26 |" in page
    root = copy_results(tmp_path)
    path = root / ATTENTION_VARIANTS
    path.write_text(path.read_text("utf-8").replace("| 26 |", "| 27 |"), "utf-8")
    assert results_tables.stale_files(root) == [BAHDANAU_PAGE]
    path.write_text("27 runs in 127 s\n", "utf-8")
    with pytest.raises(KeyError, match="no table"):
        results_tables.stale_files(root)


def test_each_recipe_row_gives_the_commands_that_train_and_score_it():
    root = Path(results_pages.ROOT)
    for row in ROWS:
        cell = headline_table.row_cells(row)["command"]
        if row.recipe == "baseline":
            assert "hfattn evaluate" not in cell, cell
            continue
        assert (root / "recipes" / f"{row.recipe}.yaml").is_file(), row.recipe
        assert cell.endswith(
            f", then `hfattn evaluate runs/{row.recipe} --split validation --split test`"
        ), cell
        assert cell in RESULTS_PAGE.read_text("utf-8")


def test_a_missing_file_fails_with_its_name(tmp_path):
    root = copy_results(tmp_path)
    (root / speed_paragraphs.GPU_BENCH).unlink()
    with pytest.raises(FileNotFoundError, match=speed_paragraphs.GPU_BENCH):
        results_tables.stale_files(root)


def test_a_missing_figure_fails_with_its_name(tmp_path):
    figure = results_figures.Figure(speed_paragraphs.BENCH, record="no such measure")
    with pytest.raises(KeyError, match="no such measure"):
        figure.read()


def test_the_blocks_need_their_markers():
    with pytest.raises(ValueError, match="results:headline:start"):
        results_tables.replace_block("no markers here", "headline", "table")


def test_a_row_names_the_machine_its_file_records(tmp_path):
    root = copy_results(tmp_path)
    row = next(r for r in ROWS if r.recipe == "char_rnn_shakespeare")
    path = root / next(iter(row.figures.values())).file
    data = json.loads(path.read_text())
    machine = {"cpu": "Test CPU 9000", "cores": 4, "isa": "AVX2", "gpu": None}
    data["training"]["provenance"] = {"machine": machine}
    path.write_text(json.dumps(data))
    assert row.machine_of(root) == "4-core Test CPU 9000, AVX2"
    assert "| 4-core Test CPU 9000, AVX2, 10 min" in results_tables.readme_table(root)


def test_a_row_whose_file_records_no_machine_fails(tmp_path):
    root = copy_results(tmp_path)
    row = next(r for r in ROWS if r.recipe == "vaswani_bible_en_es")
    path = root / next(iter(row.figures.values())).file
    data = json.loads(path.read_text())
    del data["training"]["provenance"]
    path.write_text(json.dumps(data))
    with pytest.raises(KeyError, match="records no provenance"):
        results_tables.stale_files(root)


def set_machine(path: Path, machine: dict | None) -> None:
    """Give the results file at ``path`` a provenance naming ``machine`` (``None``: none)."""
    data = json.loads(path.read_text("utf-8"))
    data.pop("provenance", None)
    if machine is not None:
        data["provenance"] = {"machine": machine}
    path.write_text(json.dumps(data), "utf-8")


def test_the_speed_paragraph_names_the_one_machine_of_its_files(tmp_path):
    root = copy_results(tmp_path)
    machine = {"cpu": "Test CPU 9000", "cores": 4, "isa": "AVX2", "gpu": None}
    files = results_figures.figure_files(SPEED_FIGURES.values())
    assert len(files) >= 3  # make bench, the exports on the Bible, the Space load test
    for name in files:
        set_machine(root / name, machine)
    assert "(`make bench`, 4-core Test CPU 9000, AVX2)" in speed_paragraphs.speed_paragraph(
        "", root
    )
    set_machine(root / files[-1], {**machine, "cores": 2})
    with pytest.raises(ValueError, match="different machines.*2-core Test CPU 9000"):
        speed_paragraphs.speed_paragraph("", root)
    set_machine(root / files[0], None)
    with pytest.raises(KeyError, match=f"{files[0]}: records no provenance"):
        results_tables.stale_files(root)


def test_the_gpu_paragraph_refuses_a_benchmark_of_another_gpu(tmp_path):
    root = copy_results(tmp_path)
    machine = results_figures.shared_machine([speed_paragraphs.BAHDANAU_GPU], root)
    assert f"On a GPU ({machine}," in speed_paragraphs.gpu_paragraph(root)
    bench = root / speed_paragraphs.GPU_BENCH
    data = json.loads(bench.read_text("utf-8"))
    data["machine"] = "NVIDIA A10G"
    bench.write_text(json.dumps(data), "utf-8")
    with pytest.raises(ValueError, match="measured on NVIDIA A10G"):
        speed_paragraphs.gpu_paragraph(root)


TEST_CPU = {"cpu": "Test CPU 9000", "cores": 4, "isa": "AVX2", "gpu": None}


def write_results(path: Path, data: dict, machine: dict | None, **origin) -> dict:
    """Write ``data`` to ``path`` with a provenance of ``origin`` naming ``machine`` (``None``:
    none); returns ``data``."""
    if machine is not None:
        data["provenance"] = {**origin, "machine": machine}
    path.write_text(json.dumps(data), "utf-8")
    return data


def write_feed(root: Path, machine: dict | None = TEST_CPU) -> dict:
    """A ``bench_feed.json`` under ``root`` as ``benchmarks/bench_feed.py`` writes it, recording
    ``machine`` (``None``: no provenance); returns its content."""
    shapes = [[301, 96, 96], [432, 65, 67], [1512, 20, 21]]
    recipes = {
        name: {
            "steps": steps,
            "token_budget": 25000,
            "distinct_shapes": len(shapes),
            "shapes": shapes,
            "padding_source": 0.1408,
            "padding_target": 0.1433,
            "target_tokens_per_step": 24756.3,
            "target_tokens_per_step_min": 21183,
            "target_tokens_per_step_max": 25338,
            "tokens_vs_budget": -0.0097,
        }  # fmt: skip
        for name, steps in zip(feed_block.FEED_RECIPES, (3000, 1500, 1500), strict=True)
    }
    compiled = {"buckets": 8, "graphs_first_epoch": 8, "recompiles_second_epoch": 0,
                "graph_breaks": 0, "epoch_seconds": [41.0, 2.5]}  # fmt: skip
    data = {"recipes": recipes, "host_ms_per_step_25k": 0.454,
            "host_ms_per_step_25k_pad_pairs": 12.377, "compile": compiled,
            "graph_breaks": 0, "recompiles_second_epoch": 0,
            "bahdanau_host_reads": {"bahdanau": 0, "luong-general": 1},
            "bahdanau_host_reads_per_step": 1}  # fmt: skip
    return write_results(root / FEED, data, machine, command="bench_feed.py")


def test_the_feed_block_gives_its_file_figures_and_names_the_machines(tmp_path):
    root = copy_results(tmp_path)
    write_feed(root)
    block = feed_block.feed_block(root)
    assert "(`.venv/bin/python -m benchmarks.bench_feed`, 4-core Test CPU 9000, AVX2)" in block
    assert (
        "| `vaswani_bible_en_es_base` | 3,000 | 3 | 14.1%, 14.3% | 24,756 (21,183–25,338) "
        "| -1.0% of 25,000 |" in block
    )
    assert "| `bahdanau_bible_en_es_rnnsearch` | 1,500 | 3 |" in block
    assert "| `bahdanau_bible_en_es_luong_base` | 1,500 | 3 |" in block
    assert (
        "301 × 96 → 96, 432 × 65 → 67, 1512 × 20 → 21; `bahdanau_bible_en_es_rnnsearch` the same"
        in block
    )
    assert "costs the host 0.45 ms with the buckets" in block
    assert "against 12.4 ms on the same pairs padded from lists" in block
    assert "27× less" in block  # 12.377 / 0.454
    assert (
        "compiled 8 graph(s) in the first epoch and 0 in the second, with 0 graph breaks" in block
    )
    assert "0 for the Bahdanau (additive) model, 1 for Luong's" in block
    gpu = speed_paragraphs.gpu_machine(root)
    bench = json.loads((root / speed_paragraphs.GPU_BENCH).read_text("utf-8"))
    tps = bench["training"][0]["hfattn"]["tokens_per_s"]
    assert f"one GPU ({gpu};" in block
    assert f"trains at {tps:,.0f} target tokens/s" in block
    assert f"an MFU of {bench['training'][0]['hfattn']['mfu']:.1%}" in block


def test_a_changed_feed_figure_makes_the_training_page_stale(tmp_path):
    root = copy_results(tmp_path)
    data = write_feed(root)
    page = results_tables.render_blocks(TRAINING_PAGE.read_text("utf-8"), TRAINING_PAGE, root)
    assert feed_block.feed_block(root) in page
    data["compile"]["recompiles_second_epoch"] = 3
    (root / FEED).write_text(json.dumps(data), "utf-8")
    assert "and 3 in the second" in feed_block.feed_block(root)
    assert results_tables.rendered(TRAINING_PAGE, root) != page


def test_the_feed_block_refuses_a_file_without_its_machine_or_figures(tmp_path):
    root = copy_results(tmp_path)
    write_feed(root, machine=None)
    with pytest.raises(KeyError, match="bench_feed.json: records no provenance"):
        feed_block.feed_block(root)
    with pytest.raises(KeyError, match="bench_feed.json: records no provenance"):
        results_tables.stale_files(root)
    data = write_feed(root)
    del data["compile"]  # bench_feed.py --skip-compile
    (root / FEED).write_text(json.dumps(data), "utf-8")
    with pytest.raises(KeyError, match="bench_feed.json: no compile.buckets"):
        feed_block.feed_block(root)
    (root / FEED).unlink()
    with pytest.raises(FileNotFoundError, match=FEED):
        feed_block.feed_block(root)


def test_the_time_to_quality_comes_from_the_gpu_speedrun_files(tmp_path):
    """Without a GPU speedrun file the README says there is no measurement; with one (a CPU
    run's file is not one) it gives that file's figures and curve, and the pages are stale."""
    root = copy_results(tmp_path)
    for path in speed_paragraphs.speedrun_files(root):
        path.unlink()
    assert speed_paragraphs.speedrun_paragraph(root) == speed_paragraphs.SPEEDRUN_NONE
    run = {"recipe": "vaswani_bible_en_es_base", "gpu": None, "wall_s": 287.4,
           "test_bleu": 30.61, "test_chrf": 52.3, "steps": 3000, "tokens_per_s": 512345.6,
           "eager_tokens_per_s": 401234.7, "mfu": 0.3612, "compile_s": 21.2,
           "first_step_wall_s": 48.9, "train_runtime_s": 230.0, "validation_bleu": 27.5,
           "curve": [{"wall_s": 95.2, "step": 1000, "bleu": 21.04},
                     {"wall_s": 190.7, "step": 2000, "bleu": 28.96}]}  # fmt: skip
    cpu = root / "speedrun_vaswani_bible_en_es_base_cpu.json"
    cpu.write_text(json.dumps(run), "utf-8")
    assert speed_paragraphs.speedrun_paragraph(root) == speed_paragraphs.SPEEDRUN_NONE
    run["gpu"] = "NVIDIA H200"
    (root / "speedrun_vaswani_bible_en_es_base_NVIDIA_H200.json").write_text(json.dumps(run))
    paragraph = speed_paragraphs.speedrun_paragraph(root)
    assert "Time to quality on one NVIDIA H200" in paragraph
    assert "saves its model 287 s after the command starts, test BLEU **30.6**" in paragraph
    assert "512,346 target tokens/s (MFU 36.1%), compiled in 21 s (eager: 401,235" in paragraph
    assert "21.0 at 95 s, 29.0 at 191 s" in paragraph
    run["compile_s"] = 0.0
    (root / "speedrun_vaswani_bible_en_es_base_NVIDIA_H200.json").write_text(json.dumps(run))
    assert speed_paragraphs.SPEEDRUN_EAGER in speed_paragraphs.speedrun_paragraph(root)
    assert README in results_tables.stale_files(root)
    del run["test_chrf"]
    (root / "speedrun_vaswani_bible_en_es_base_NVIDIA_H200.json").write_text(json.dumps(run))
    with pytest.raises(KeyError, match="test_chrf"):
        speed_paragraphs.speedrun_paragraph(root)


def scale_run(first_step: float | None, peak: float, preparation: str, seconds: float | None,
              status: str = "done") -> dict:  # fmt: skip
    """One run of a ``data_scale.json`` case (the fields the docs read)."""
    return {"status": status, "seconds": 612.0, "seconds_to_first_step": first_step,
            "peak_rss_gb": peak, "preparation": preparation,
            "preparation_seconds": seconds}  # fmt: skip


def write_data_scale(root: Path, machine: dict | None = TEST_CPU) -> dict:
    """A ``data_scale.json`` under ``root`` as ``benchmarks/bench_data_scale.py`` writes it
    (the fields the docs read), recording ``machine`` (``None``: no provenance)."""
    text = {"bytes": 99_999_979, "copies": 22.857,
            "made_of": "the Shakespeare training plays repeated"}  # fmt: skip
    pairs = {"pairs": 1_450_200, "repeats": 50, "made_of": "the Bible's training books repeated"}
    target = {"name": "first run: seconds to the first step", "value": 71.2, "target": 60,
              "comparison": "<=", "met": False}  # fmt: skip
    cases = {
        "char-rnn/100MB": {"recipe": "char_rnn_shakespeare", "processes": 1, "steps_watched": 100,
                           "corpus": text, "steps_per_s": 9.87,
                           "first_run": scale_run(71.2, 1.83, "prepared", 58.44),
                           "cached_run": scale_run(6.1, 0.9, "reused", None),
                           "targets": [target, {**target, "met": True}]},
        "luong-2proc/1.45M": {"recipe": "bahdanau_bible_en_es", "processes": 2,
                              "steps_watched": 100, "corpus": pairs, "steps_per_s": None,
                              "first_run": scale_run(None, 23.9, "not reported", None,
                                                     status="over RSS limit"),
                              "cached_run": scale_run(14.0, 2.2, "reused", None),
                              "targets": [{**target, "value": None},
                                          {**target, "name": "peak", "met": None}]},
        "vaswani-prepare/1.45M": {"recipe": "vaswani_bible_en_es_base", "processes": 1,
                                  "steps_watched": 100, "corpus": pairs, "steps_per_s": None,
                                  "first_run": {**scale_run(None, 2.1, "prepared", 88.1),
                                                "seconds_to_prepared": 93.4},
                                  "cached_run": {**scale_run(None, 0.5, "reused", None),
                                                 "seconds_to_prepared": 4.2},
                                  "targets": []},
    }  # fmt: skip
    data = {"benchmark": "data_scale", "quick": False, "cases": cases,
            "settings": {"poll_s": 0.1, "steady_from": 10}}  # fmt: skip
    return write_results(root / DATA_SCALE, data, machine, date="2026-11-27T15:00:00+00:00")


def test_the_large_corpora_say_they_have_no_measurement_without_their_file(tmp_path):
    root = copy_results(tmp_path)
    (root / DATA_SCALE).unlink(missing_ok=True)
    for page in (CAUSAL_LM_PAGE, TRANSLATION_PAGE):
        assert data_scale_block.data_scale_block(page, root) == data_scale_block.DATA_SCALE_NONE
        assert page in results_tables.BLOCKS


def test_the_large_corpora_tables_are_the_data_scale_files(tmp_path):
    root = copy_results(tmp_path)
    data = write_data_scale(root)
    text = data_scale_block.data_scale_block(CAUSAL_LM_PAGE, root)
    assert (
        "on 4-core Test CPU 9000, AVX2 (`python -m benchmarks.bench_data_scale`, 2026-11-27)"
        in text
    )
    assert "steps/s are the second run's, from step 10 to the last of the 100 steps" in text
    assert (
        "| `char_rnn_shakespeare` | 100.0 MB (the Shakespeare training plays repeated, 22.857×) "
        "| 71.2 s (prepared in 58.4 s), peak 1.83 GB | 6.1 s (reused), peak 0.90 GB | 9.87 "
        "| 1 of 2 met; missed: first run: seconds to the first step 71.2 (target <= 60) |"
    ) in text
    assert "bahdanau" not in text
    pairs = data_scale_block.data_scale_block(TRANSLATION_PAGE, root)
    assert (
        "| `bahdanau_bible_en_es`, 2 processes | 1,450,200 pairs (the Bible's training books "
        "repeated, 50×) | over RSS limit after 612 s, no step; peak 23.90 GB "
        "| 14.0 s (reused), peak 2.20 GB | — | 0 of 2 met; missed: first run: seconds to the "
        "first step none (target <= 60); not measured: peak |"
    ) in pairs
    assert (
        "| `vaswani_bible_en_es_base` | 1,450,200 pairs (the Bible's training books repeated, 50×) "
        "| `hfattn prepare`: 93.4 s (prepared), peak 2.10 GB "
        "| `hfattn prepare`: 4.2 s (reused), peak 0.50 GB | — | — |"
    ) in pairs
    page = results_tables.rendered(CAUSAL_LM_PAGE, root)
    assert text in page and "## Large corpora" in page
    data["cases"]["char-rnn/100MB"]["cached_run"]["seconds_to_first_step"] = 7.3
    (root / DATA_SCALE).write_text(json.dumps(data), "utf-8")
    assert "7.3 s (reused)" in results_tables.rendered(CAUSAL_LM_PAGE, root)
    assert CAUSAL_LM_PAGE in results_tables.stale_files(root)


def test_the_large_corpora_refuse_a_quick_file_or_one_without_its_machine(tmp_path):
    root = copy_results(tmp_path)
    data = write_data_scale(root)
    (root / DATA_SCALE).write_text(json.dumps({**data, "quick": True}), "utf-8")
    with pytest.raises(ValueError, match="data_scale.json: the figures of a --quick run"):
        results_tables.stale_files(root)
    write_data_scale(root, machine=None)
    with pytest.raises(KeyError, match="data_scale.json: records no provenance"):
        data_scale_block.data_scale_block(TRANSLATION_PAGE, root)
    data = write_data_scale(root)
    del data["cases"]["luong-2proc/1.45M"], data["cases"]["vaswani-prepare/1.45M"]
    (root / DATA_SCALE).write_text(json.dumps(data), "utf-8")
    assert data_scale_block.data_scale_block(TRANSLATION_PAGE, root) == (
        data_scale_block.DATA_SCALE_NONE
    )  # no case of the page
