"""The translation Space on a model with a CTranslate2 export (issue 23): with ``ct2/`` beside
the model (a local folder or the Hub repo) and ``ctranslate2`` installed it decodes with
CTranslate2, giving ``generate``'s translations (greedy and beam) and the same heatmap (one
teacher-forced pass of the PyTorch model), and says so on the page; ``HFATTN_ENGINE`` forces
an engine; a model without an export decodes with ``generate``; the pushed Space installs
``ctranslate2`` and its README names the engine; slow: the pushed Space, run from the Hub
without hfattn, decodes with the repo's export.

Model: the tiny Vaswani date normaliser of the publishing tests (2+2 layers, 4 heads, d 32,
200 steps), exported in fp32 with ``hfattn export``.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import numpy as np
import pytest
from gradio_client import Client

from hfattn.cli import main as cli_main
from hfattn.hub import inspect_folder, load_space_app, push_model_folder, stage_space
from tests.helpers.space_helpers import heatmap, launch_space
from tests.helpers.translation_publishing import NEW_TOKENS, SENTENCES, expected_translations

pytest.importorskip(
    "ctranslate2", reason="ctranslate2 is not installed: pip install 'hfattn[serve]'"
)

LAYERS, HEADS = 2, 4  # tiny_runs.TINY_TRANSLATION_MODELS["vaswani"]
GENERATE = "engine: transformers generate"
CTRANSLATE2 = "engine: CTranslate2 (float32)"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path]:
    """``(with_export, plain)``: the tiny Vaswani run with its fp32 export in ``ct2/``, and a
    copy of it without one; do not modify them. The run is the publishing tests' (trained
    once per session), copied here before the export."""
    from tests.helpers.shared_runs import shared_run
    from tests.helpers.tiny_runs import build_vaswani_translation_run

    root = tmp_path_factory.mktemp("ct2_space")
    shared = shared_run(tmp_path_factory, "vaswani_tiny", build_vaswani_translation_run)
    run = Path(shutil.copytree(shared, root / "vaswani"))
    plain = root / "plain"
    shutil.copytree(run, plain, ignore=shutil.ignore_patterns("checkpoints"))
    assert cli_main(["export", str(run), str(run / "ct2"), "--format", "ctranslate2"]) == 0
    return run, plain


@pytest.fixture(scope="module")
def app(runs, tmp_path_factory):
    """The translation Space's ``app.py``, staged for the run with the export."""
    staged = stage_space(inspect_folder(runs[0]), str(runs[0]), tmp_path_factory.mktemp("app"))
    return load_space_app(staged)


def _contexts(app, run: Path):
    """``(generate's context, CTranslate2's context)`` on the same loaded model."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    model = AutoModelForSeq2SeqLM.from_pretrained(run).eval()
    tokenizer = AutoTokenizer.from_pretrained(run)
    limits = app.frame.Limits(max_new_tokens=40)
    engine = app.translation_engine.load_engine(str(run), "auto")
    assert isinstance(engine, app.translation_engine.CTranslate2Engine)
    return (
        app.frame.Context(model, tokenizer, limits, str(run)),
        app.frame.Context(model, tokenizer, limits, str(run), engine),
    )


def _engine_line(config: dict) -> str:
    """The page's engine line, from a Gradio app config."""
    (line,) = [
        c["props"]["value"]
        for c in config["components"]
        if c.get("props", {}).get("elem_id") == "engine"
    ]
    return line


# ---- decoding --------------------------------------------------------------------------------
def test_ctranslate2_translates_and_draws_as_generate(app, runs):
    generate, ctranslate2 = _contexts(app, runs[0])
    assert (app.engine_label(generate), app.engine_label(ctranslate2)) == (
        GENERATE.removeprefix("engine: "),
        CTRANSLATE2.removeprefix("engine: "),
    )
    text = "\n".join(SENTENCES)
    want = {beams: expected_translations(runs[0], SENTENCES, beams) for beams in (1, 3)}
    assert len(set(want[1])) == len(SENTENCES)  # trained: different dates, different outputs
    for beams, new_tokens, layer, head in [
        (1, NEW_TOKENS, None, "mean"),
        (3, NEW_TOKENS, 1, "2"),
        (1, 3, None, "mean"),  # cut at the cap: no end token, 3 rows
        (4, 3, 2, "4"),
    ]:
        ours, ours_plot = app.translate(ctranslate2, text, beams, new_tokens, layer, head)
        theirs, their_plot = app.translate(generate, text, beams, new_tokens, layer, head)
        assert ours == theirs, (beams, new_tokens)
        if new_tokens == NEW_TOKENS:
            assert ours.split("\n") == want[beams]
        title, sources, outputs, weights = heatmap(ours_plot)
        assert heatmap(their_plot)[:3] == (title, sources, outputs)
        np.testing.assert_allclose(weights, heatmap(their_plot)[3], atol=2e-6)
        source_ids = ctranslate2.tokenizer(SENTENCES[0])["input_ids"]
        assert sources == ctranslate2.tokenizer.convert_ids_to_tokens(source_ids)
        first = ctranslate2.tokenizer(text_target=ours.split("\n")[0])["input_ids"]  # + <eos>
        rows = new_tokens if new_tokens < NEW_TOKENS else len(first)
        assert weights.shape == (rows, len(source_ids)) == (len(outputs), len(sources))
        assert np.allclose(weights.sum(axis=1), 1.0, atol=1e-4)
        assert title.startswith(f"Cross-attention, layer {layer or LAYERS} of {LAYERS}")
    with pytest.raises(app.frame.gr.Error, match="source 0 is blank"):  # as the command says
        app.translate(ctranslate2, "", 2, NEW_TOKENS)


def test_the_engine_follows_the_models_stopping_rule_and_beam_width(app, runs):
    generate, ctranslate2 = _contexts(app, runs[0])
    config = generate.model.generation_config
    patience = app.translation_engine.beam_patience
    assert patience(True) == 1.0 and patience(False) == 2.0
    # early_stopping=True is CTranslate2's own rule (patience 1): beam search with any
    # length penalty gives generate's translations.
    config.early_stopping = True
    text = "\n".join(SENTENCES)
    for penalty in (0.5, 2.0):
        config.length_penalty = penalty
        assert (
            app.translate(ctranslate2, text, 4, NEW_TOKENS)[0]
            == (app.translate(generate, text, 4, NEW_TOKENS)[0])
        ), penalty
    # The page's beam slider starts at the model's own width.
    for beams, shown in ((3, 3), (1, 1), (20, app.MAX_BEAMS)):
        config.num_beams = beams
        assert app._default_beams(generate) == shown


def test_engine_choice(app, runs, monkeypatch):
    run, plain = (str(r) for r in runs)
    engines = app.translation_engine
    monkeypatch.delenv(engines.ENGINE_ENV, raising=False)
    assert engines.engine_choice() == "auto"
    assert engines.load_engine(run).label == "CTranslate2 (float32)"
    assert engines.load_engine(plain) is None  # auto, no export: generate
    assert engines.load_engine(run, "generate") is None
    with pytest.raises(RuntimeError, match=r"HFATTN_ENGINE=ctranslate2 but .*plain has no CTr"):
        engines.load_engine(plain, "ctranslate2")
    monkeypatch.setenv(engines.ENGINE_ENV, "fast")
    with pytest.raises(
        ValueError, match="HFATTN_ENGINE must be one of auto, generate, ctranslate2; got 'fast'"
    ):
        engines.engine_choice()

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name == "ctranslate2" else find_spec(name, *args),
    )
    assert engines.load_engine(run, "auto") is None  # not installed: generate
    with pytest.raises(RuntimeError, match="but ctranslate2 is not installed"):
        engines.load_engine(run, "ctranslate2")


# ---- the page, staging -----------------------------------------------------------------------
def test_space_page_says_which_engine_runs(app, runs, tmp_path, monkeypatch):
    run, plain = runs
    space = launch_space(run, tmp_path / "space")  # auto: the export
    try:
        client = Client(space.url, verbose=False)
        assert _engine_line(client.config) == CTRANSLATE2
        text, plot = client.predict("\n".join(SENTENCES), 3, NEW_TOKENS, api_name="/translate")
        assert text.split("\n") == expected_translations(run, SENTENCES, 3)
        assert heatmap(plot)[3].shape[1] > 0
    finally:
        space.close()
    requirements = (space.staged / "requirements.txt").read_text().splitlines()
    assert "ctranslate2>=4.5,<5" in requirements and "hfattn" not in " ".join(requirements)
    readme = " ".join((space.staged / "README.md").read_text().split())
    assert "Translations are decoded by **CTranslate2** from the model repo's" in readme
    assert "(`ct2/`, float32;" in readme and "`HFATTN_ENGINE=generate`" in readme

    monkeypatch.setenv(app.translation_engine.ENGINE_ENV, "generate")
    assert _engine_line(app.build_demo(str(run)).config) == GENERATE
    monkeypatch.setenv(app.translation_engine.ENGINE_ENV, "auto")
    assert _engine_line(app.build_demo(str(plain)).config) == GENERATE

    staged = stage_space(inspect_folder(plain), "owner/plain", tmp_path / "plain_space")
    assert "ctranslate2" not in (staged / "requirements.txt").read_text()
    readme = " ".join((staged / "README.md").read_text().split())
    assert "Translations are decoded by transformers' `generate` (the model repo" in readme


def test_the_hub_repo_export_is_found(app, runs, hub_server, tmp_path, monkeypatch):
    """The pushed repo's ``ct2/`` is downloaded (only it) for the Space; a repo without one
    gives ``generate``."""
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "cache"))
    push_model_folder(runs[0], "tester/ct2-space", space=True)
    push_model_folder(runs[1], "tester/plain-space", space=False)
    assert "ct2/model.bin" in hub_server.files("tester/ct2-space")
    space_files = hub_server.files("tester/ct2-space", repo_type="space")
    assert "requirements.txt" in space_files
    engine = app.translation_engine.load_engine("tester/ct2-space", "auto")
    assert engine.label == "CTranslate2 (float32)"
    assert engine.folder.name == "ct2" and (engine.folder / "model.bin").is_file()
    downloaded = {p.name for p in engine.folder.parent.iterdir()}
    assert downloaded == {"ct2"}  # the model's own files are not fetched twice
    assert app.translation_engine.load_engine("tester/plain-space", "auto") is None
    with pytest.raises(RuntimeError, match="tester/plain-space has no CTranslate2 export"):
        app.translation_engine.load_engine("tester/plain-space", "ctranslate2")


@pytest.mark.slow
def test_space_from_hub_decodes_with_the_export_without_hfattn(
    hub_server, runs, fresh_python, tmp_path
):
    """The pushed model + export + Space, started like on Spaces (``python app.py``) in an
    environment without hfattn, decode with CTranslate2 and translate as hfattn does."""
    from tests.helpers.fresh_env import space_from_hub

    repo_id = "tester/ct2-e2e"
    push_model_folder(runs[0], repo_id, space=True)
    with space_from_hub(hub_server, repo_id, fresh_python, tmp_path) as (space_dir, url):
        client = Client(url, verbose=False)
        engine = _engine_line(client.config)
        text, plot = client.predict("\n".join(SENTENCES), 3, NEW_TOKENS, api_name="/translate")
    assert "ctranslate2>=4.5,<5" in (space_dir / "requirements.txt").read_text()
    assert engine == CTRANSLATE2
    assert text.split("\n") == expected_translations(runs[0], SENTENCES, 3)
    assert heatmap(plot)[3].shape[1] > 0
    assert hub_server.resolved(repo_id, "ct2/model.bin")


# ---- the benchmark's report ------------------------------------------------------------------
def test_benchmark_engine_records_judge_the_p95_target():
    """``bench_space_load.py --engines``: the p95 ratio generate / CTranslate2 is judged
    against 2×, failed requests against 0; the table has one row per engine."""
    from benchmarks.lib.space_engines import engine_records, engines_table

    def engine(line, p50, p95, failed=0):
        summary = {"clients": 50, "failed": failed, "p50_s": p50, "p95_s": p95}
        return {
            "engine_line": line,
            "unloaded": {"requests": 20, "median_s": p50 / 20, "max_s": p95 / 20},
            "p50_s": p50,
            "p95_s": p95,
            "server_cpu_ms_per_request": p50 * 3,
            "failed": failed,
            "rounds": [summary] * 3,
        }

    result = {
        "scenario": {"clients": 50},
        "engines": {
            "generate": engine(GENERATE, 10.0, 19.0),
            "ctranslate2": engine(CTRANSLATE2, 4.0, 10.0, failed=1),
        },
        "p95_ratio": 1.9,
        "p50_ratio": 2.5,
        "unloaded_ratio": 2.5,
        "server_cpu_ratio": 2.5,
        "same_translations": "4/4",
    }
    met = {r["name"]: r["met"] for r in engine_records(result).records}
    assert met["translation Space: p95 under load, generate / CTranslate2"] is False
    assert met["translation Space, generate: failed requests of 50 concurrent clients x 3 rounds"]
    assert not met[
        "translation Space, ctranslate2: failed requests of 50 concurrent clients x 3 rounds"
    ]
    result["p95_ratio"] = 2.0
    met = {r["name"]: r["met"] for r in engine_records(result).records}
    assert met["translation Space: p95 under load, generate / CTranslate2"] is True
    rows = engines_table(result).splitlines()
    assert rows[2] == f"| generate | {GENERATE} | 50 | 3 | **0** | 10.00 | 19.00 | 0.500 | 30.0 |"
    assert rows[3].startswith(f"| ctranslate2 | {CTRANSLATE2} | 50 | 3 | **1** | 4.00 | 10.00")
    assert "generate / CTranslate2: **p95 2.00×** (target ≥ 2×)" in rows[-1]
    assert "server CPU per request 2.50×" in rows[-1]
