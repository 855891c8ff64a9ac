"""What the translation publishing tests share (``tests/hub/``, ``tests/spaces/``): the
decoding settings of the tiny translation runs, what hfattn itself translates, and a push
whose card must hold the run's scores."""

from __future__ import annotations

import json

import pytest
from huggingface_hub import ModelCard

from hfattn.cli import main as cli_main

NEW_TOKENS = 16
"""The tiny translation runs' ``max_new_tokens``."""
SENTENCES = ["April 22, 2019", "3 May 2001", "December 31, 1999"]
"""Dates the tests translate (the first is the recipe's generation example)."""


def load_translator(folder):
    """``(model, tokenizer)`` of a translator folder, in eval mode."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    return AutoModelForSeq2SeqLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(
        folder
    )


def expected_translations(folder, sentences, num_beams, max_new_tokens=NEW_TOKENS) -> list[str]:
    """What hfattn's own ``translate_texts`` gives for ``sentences``."""
    from hfattn.tasks.translation.inference import translate_texts

    model, tokenizer = load_translator(folder)
    return translate_texts(
        model, tokenizer, sentences, num_beams=num_beams, max_new_tokens=max_new_tokens
    )


def push_translation_run(hub_server, run, repo_id, capsys):
    """Push ``run`` with the CLI and check what every translation push must hold: the model
    files without checkpoints, and a card whose model-index carries the run's BLEU, chrF and
    exact match. Returns ``(uploaded file names, card, eval_results.json)``."""
    assert cli_main(["push", str(run), "--repo-id", repo_id]) == 0
    assert capsys.readouterr().out.split() == [f"{hub_server.url}/{repo_id}"]
    files = set(hub_server.files(repo_id))
    assert {"README.md", "config.json", "model.safetensors", "tokenizer.json"} <= files
    assert not any(f.startswith("checkpoints") for f in files)

    card = ModelCard.load(hub_server.revision_dir(repo_id) / "README.md")
    recorded = json.loads((run / "eval_results.json").read_text())
    want = {r["metric_type"]: r["value"] for r in recorded["results"]}
    got = {r.metric_type: r.metric_value for r in card.data.eval_results}
    for metric in ("bleu", "chrf", "exact_match"):
        assert got[metric] == pytest.approx(want[metric], rel=1e-12), metric
    return files, card, recorded
