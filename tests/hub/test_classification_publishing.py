"""Publishing classifiers: a fully fine-tuned tiny DistilBERT, a LoRA adapter on it (published
as the adapter, with ``base_model`` and its labels, and merged), and an ``rnn-classifier``
with attention pooling, all trained by the classification recipes; their cards, the
classification Space called through gradio_client, ``hfattn demo``, a headless Chromium and
the adapter's Space run from the Hub without hfattn."""

from __future__ import annotations

import ast
import json
import math
import sys
from pathlib import Path

import pytest
import torch
from gradio_client import Client
from gradio_client.exceptions import AppError
from huggingface_hub import HfApi, ModelCard

from hfattn.cli import main as cli_main
from hfattn.hub import ModelFolderError, inspect_folder
from hfattn.tasks.classification.task import TASK as CLASSIFICATION
from tests.helpers.browser import CHROMIUM, CHROMIUM_ARGS
from tests.helpers.fresh_env import run_card_snippet, space_from_hub
from tests.helpers.space_helpers import launch_space, model_calls
from tests.helpers.tiny_runs import build_classification_run

BASE_ID = "distilbert/distilbert-base-uncased"
"""The base model the DistilBERT recipes name (``hub.base_model``); the tiny random DistilBERT
stands in for it, and is served under this id by the local Hub where a test needs it."""
GENRES = ["comedy", "history", "tragedy", "romance"]
TEXTS = [
    "Now is the winter of our discontent made glorious summer by this sun of York.",
    "If music be the food of love, play on; give me excess of it, that, surfeiting, "
    "the appetite may sicken, and so die.",
]
REBER = ["B T B T S X S E T E", "B P B P T V V E P E", "B T B T S X S E P E"]
"""Two embedded-Reber strings and a near miss (the last: second and second-to-last differ)."""
CARD_EXAMPLE = CLASSIFICATION.card.default_example
"""The card's (and the staged Space's) example: the recipes record no example texts."""
MAX_INPUT_CHARS = 300


def distilbert_overrides(base: Path) -> list[str]:
    """The DistilBERT recipes on the tiny base and the embedded genre task, short texts (the
    fields of a file source back at their defaults: genre has its own columns and splits)."""
    return [
        f"model.pretrained={base}",
        "data.source=genre",
        "data.text_column=text",
        "data.label_column=label",
        "data.validation_fraction=0.1",
        "data.max_held_out_rows=3000",
        "data.max_length=64",
        "training.batch_size=16",
        "training.warmup_steps=2",
    ]


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory) -> Path:
    from tests.helpers.tiny_pretrained import tiny_distilbert_folder

    return tiny_distilbert_folder(tmp_path_factory.mktemp("base"))


@pytest.fixture(scope="module")
def full_run(tiny_base, tmp_path_factory) -> Path:
    """``distilbert_imdb.yaml`` (every weight fine-tuned) on the tiny base and the genre task."""
    return build_classification_run(
        tmp_path_factory.mktemp("full"),
        "distilbert_imdb.yaml",
        *distilbert_overrides(tiny_base),
        "training.learning_rate=1e-3",
    )


@pytest.fixture(scope="module")
def lora_run(tiny_base, tmp_path_factory) -> Path:
    """``distilbert_sst2_lora.yaml`` (a LoRA adapter, trainable head) on the same."""
    return build_classification_run(
        tmp_path_factory.mktemp("lora"),
        "distilbert_sst2_lora.yaml",
        *distilbert_overrides(tiny_base),
        "training.learning_rate=1e-2",
    )


@pytest.fixture
def rnn_run(reber_attention_run) -> Path:
    """``rnn_classifier_reber.yaml`` with attention pooling (remote code on the Hub)."""
    return reber_attention_run


def load_classifier(folder: Path, base: Path | None = None):
    """``(model, tokenizer)`` of a full model folder, or of an adapter folder (of the genre
    task) applied to ``base`` with the head built for the genres."""
    from peft import PeftModel
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    if base is None:
        return AutoModelForSequenceClassification.from_pretrained(folder).eval(), tokenizer
    model = AutoModelForSequenceClassification.from_pretrained(
        base, num_labels=len(GENRES), id2label=dict(enumerate(GENRES))
    )
    return PeftModel.from_pretrained(model, str(folder)).eval(), tokenizer


@torch.no_grad()
def logits_of(model, tokenizer, text: str) -> list[float]:
    return model(**tokenizer(text, return_tensors="pt", truncation=True)).logits[0].tolist()


def softmax(logits: list[float]) -> list[float]:
    """exp(z_i - max z) / Σ_j exp(z_j - max z), written out."""
    top = max(logits)
    exps = [math.exp(z - top) for z in logits]
    return [e / sum(exps) for e in exps]


def expected_scores(model, tokenizer, text: str) -> dict[str, float]:
    probabilities = softmax(logits_of(model, tokenizer, text))
    return {model.config.id2label[i]: p for i, p in enumerate(probabilities)}


def check_model_index(card: ModelCard, run: Path) -> None:
    """The card's model-index holds exactly the run's recorded test loss, accuracy, macro-F1."""
    recorded = json.loads((run / "eval_results.json").read_text())
    got = {(r.dataset_split, r.metric_type): r.metric_value for r in card.data.eval_results}
    want = {(r["split"], r["metric_type"]): r["value"] for r in recorded["results"]}
    assert got == want
    assert {("test", "accuracy"), ("test", "macro_f1")} <= set(got)
    assert {r.task_type for r in card.data.eval_results} == {"text-classification"}
    assert {r.dataset_name for r in card.data.eval_results} == {recorded["dataset_name"]}


def push(hub_server, run: Path, repo_id: str, capsys, *flags: str) -> tuple[set[str], ModelCard]:
    """``hfattn push RUN --repo-id REPO_ID FLAGS``; returns the uploaded files and the card."""
    assert cli_main(["push", str(run), "--repo-id", repo_id, *flags]) == 0
    assert capsys.readouterr().out.split()[0] == f"{hub_server.url}/{repo_id}"
    files = set(hub_server.files(repo_id))
    assert "README.md" in files and not any(f.startswith("checkpoints") for f in files)
    return files, ModelCard.load(hub_server.revision_dir(repo_id) / "README.md")


def serve_base(hub_server, tiny_base: Path) -> None:
    """Serve the tiny DistilBERT as :data:`BASE_ID` from the local Hub."""
    api = HfApi(endpoint=hub_server.url)
    api.create_repo(BASE_ID, exist_ok=True)
    api.upload_folder(repo_id=BASE_ID, folder_path=tiny_base)


def run_snippet(hub_server, card: ModelCard, tmp_path: Path, index: int = 0) -> str:
    """Run the card's ``index``-th Python snippet as a user pastes it (models from the Hub);
    returns its last output line."""
    return run_card_snippet(
        sys.executable,
        card.text,
        tmp_path,
        index,
        HF_HOME=str(tmp_path / "hf_home"),
        HF_ENDPOINT=hub_server.url,
    )


# ---------------------------------------------------------------------------- model cards
@pytest.mark.slow
def test_push_full_model(hub_server, full_run, tmp_path, capsys):
    files, card = push(hub_server, full_run, "tester/genre-full", capsys)
    assert {"config.json", "model.safetensors", "tokenizer.json", "eval_results.json"} <= files
    assert "labels.json" not in files  # config.json holds id2label
    check_model_index(card, full_run)
    assert card.data.pipeline_tag == "text-classification"
    assert card.data.library_name == "transformers"
    assert card.data.base_model == BASE_ID
    assert "| Labels | `comedy`, `history`, `tragedy`, `romance` |" in card.text
    assert "| Architecture | `DistilBertForSequenceClassification` |" in card.text

    # The pipeline snippet runs against the Hub and gives the model's softmax (top_k=None:
    # every label, best first).
    assert 'pipeline("text-classification", model="tester/genre-full", top_k=None)' in card.text
    answer = ast.literal_eval(run_snippet(hub_server, card, tmp_path, index=1))
    want = expected_scores(*load_classifier(full_run), CARD_EXAMPLE)
    assert {a["label"]: a["score"] for a in answer} == pytest.approx(want, abs=1e-6)
    assert [a["label"] for a in answer] == sorted(want, key=want.get, reverse=True)


def test_push_lora_adapter_and_merged_model(hub_server, lora_run, tiny_base, tmp_path, capsys):
    files, card = push(hub_server, lora_run, "tester/genre-lora", capsys)
    assert {"adapter_config.json", "adapter_model.safetensors", "labels.json"} <= files
    assert not files & {"config.json", "model.safetensors"}  # an adapter, not a full model
    check_model_index(card, lora_run)
    assert card.data.base_model == BASE_ID
    assert card.data.library_name == "peft" and "lora" in card.data.tags
    assert "| Labels | `comedy`, `history`, `tragedy`, `romance` |" in card.text
    adapter = hub_server.download("tester/genre-lora", tmp_path / "adapter")
    assert json.loads((adapter / "labels.json").read_text()) == {"labels": GENRES}
    assert (
        json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"]
        == BASE_ID
    )

    files, merged_card = push(hub_server, lora_run, "tester/genre-merged", capsys, "--merge")
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= files
    assert not files & {"adapter_config.json", "adapter_model.safetensors", "labels.json"}
    check_model_index(merged_card, lora_run)
    assert merged_card.data.base_model == BASE_ID
    assert merged_card.data.library_name == "transformers"
    assert "lora-merged" in merged_card.data.tags
    merged_dir = hub_server.download("tester/genre-merged", tmp_path / "merged")

    # The merged model computes what the base + adapter computes, and is not the base alone.
    merged, tokenizer = load_classifier(merged_dir)
    with_adapter, _ = load_classifier(adapter, base=tiny_base)
    assert list(merged.config.id2label.values()) == GENRES
    for text in TEXTS:
        got, want = logits_of(merged, tokenizer, text), logits_of(with_adapter, tokenizer, text)
        assert got == pytest.approx(want, abs=1e-5)
    with with_adapter.disable_adapter():
        plain = logits_of(with_adapter, tokenizer, TEXTS[0])
    assert plain != pytest.approx(logits_of(merged, tokenizer, TEXTS[0]), abs=1e-3)


@pytest.mark.slow
def test_adapter_usage_snippet_runs(hub_server, lora_run, tiny_base, tmp_path, capsys):
    """The card's peft snippet, pasted as is, loads the base from the Hub with the adapter's
    labels and prints the label probabilities of the card's example."""
    serve_base(hub_server, tiny_base)
    _, card = push(hub_server, lora_run, "tester/genre-lora", capsys)
    assert "num_labels=len(labels)" in card.text
    printed = ast.literal_eval(run_snippet(hub_server, card, tmp_path))
    model, tokenizer = load_classifier(lora_run, base=tiny_base)
    want = expected_scores(model, tokenizer, CARD_EXAMPLE)
    assert printed == {label: round(p, 3) for label, p in want.items()}


def test_rnn_classifier_card(rnn_run, tmp_path):
    from hfattn.hub import render_model_card

    text = render_model_card(inspect_folder(rnn_run), "me/reber").text
    assert "| Attention | attention pooling, score `additive` |" in text
    assert "| Labels | `invalid`, `valid` |" in text
    assert 'pipeline("text-classification", model="me/reber", trust_remote_code=True' in text


def test_adapter_without_labels_is_refused(lora_run, tmp_path):
    import shutil

    folder = tmp_path / "adapter"
    shutil.copytree(lora_run, folder, ignore=shutil.ignore_patterns("checkpoints"))
    (folder / "confusion_matrix.json").unlink()
    with pytest.raises(ModelFolderError, match="sequence-classification adapter needs its label"):
        inspect_folder(folder)
    (folder / "labels.json").write_text('{"labels": "comedy"}')
    with pytest.raises(ModelFolderError, match="'labels' must be a non-empty list of strings"):
        inspect_folder(folder)
    (folder / "labels.json").write_text(json.dumps({"labels": GENRES}))
    assert inspect_folder(folder).labels == tuple(GENRES)


# --------------------------------------------------------------------------------- Space
def launch(run: Path, tmp: Path):
    """The classification Space staged for ``run`` and launched in-process (inputs capped at
    :data:`MAX_INPUT_CHARS`)."""
    space = launch_space(run, tmp, max_input_chars=MAX_INPUT_CHARS)
    return space.staged, space.demo


def check_scores(payload: dict, want: dict[str, float]) -> None:
    """A ``gr.Label`` answer: every label's confidence (best first) is the model's softmax."""
    confidences = {c["label"]: c["confidence"] for c in payload["confidences"]}
    assert confidences == pytest.approx(want, abs=1e-6)
    assert sum(confidences.values()) == pytest.approx(1.0, abs=1e-6)
    assert payload["label"] == max(want, key=want.get)
    assert [c["label"] for c in payload["confidences"]] == sorted(want, key=want.get, reverse=True)


@pytest.mark.parametrize("kind", ["full", "lora", "rnn"])
def test_space_label_scores_via_gradio_client(kind, request, tiny_base, tmp_path):
    run = request.getfixturevalue(f"{kind}_run")
    staged, demo = launch(run, tmp_path / "space")
    try:
        client = Client(demo.local_url, verbose=False)
        model, tokenizer = load_classifier(run, base=tiny_base if kind == "lora" else None)
        for text in REBER if kind == "rnn" else TEXTS:
            scores, attention = client.predict(text, api_name="/classify")
            check_scores(scores, expected_scores(model, tokenizer, text))
            if kind != "rnn":
                assert attention is None  # no attention pooling: nothing to show
                continue
            inputs = tokenizer(text, return_tensors="pt")
            with torch.no_grad():
                alpha = model(**inputs, output_attentions=True).attentions[0][0, 0]
            tokens = tokenizer.convert_ids_to_tokens(inputs["input_ids"][0].tolist())
            assert [item["token"] for item in attention] == [f"{t} " for t in tokens]
            weights = [item["class_or_confidence"] for item in attention]
            assert weights == pytest.approx((alpha / alpha.max()).tolist(), abs=1e-4)
            assert max(weights) == 1.0

        with model_calls() as calls:
            with pytest.raises(AppError, match=f"Text is {MAX_INPUT_CHARS + 1} characters long"):
                client.predict("x" * (MAX_INPUT_CHARS + 1), api_name="/classify")
            with pytest.raises(AppError, match="text 0 is blank: there is nothing to classify"):
                client.predict("  \n", api_name="/classify")
        assert calls == []  # refused before the model
    finally:
        demo.close()
    assert json.loads((staged / "examples.json").read_text()) == [CARD_EXAMPLE]
    requirements = (staged / "requirements.txt").read_text().split()
    assert ("peft" in requirements) == (kind == "lora") and "hfattn" not in requirements


def test_demo_command_serves_an_adapter_run(lora_run, tiny_base, monkeypatch):
    """``hfattn demo RUN`` on an adapter run folder serves the base + adapter with the run's
    labels (the launch is made non-blocking to query it)."""
    import gradio as gr

    served = {}
    launch_blocking = gr.Blocks.launch

    def launch_and_query(self, **kwargs):
        assert kwargs["server_name"] == "127.0.0.1" and kwargs["share"] is False
        launch_blocking(self, prevent_thread_lock=True, server_name="127.0.0.1", quiet=True)
        try:
            served["answer"] = Client(self.local_url, verbose=False).predict(
                TEXTS[1], api_name="/classify"
            )
        finally:
            self.close()

    monkeypatch.setattr(gr.Blocks, "launch", launch_and_query)
    monkeypatch.setattr("hfattn.commands.demo.wait_for_interrupt", lambda: None)
    assert cli_main(["demo", str(lora_run)]) == 0
    check_scores(
        served["answer"][0], expected_scores(*load_classifier(lora_run, tiny_base), TEXTS[1])
    )


# ------------------------------------------------------------------------------- browser
@pytest.mark.slow
def test_classification_in_headless_chromium(full_run, tmp_path):
    if not CHROMIUM.exists():
        pytest.skip("chromium is not installed (`make browser` / apt-get install chromium)")
    from playwright.sync_api import expect, sync_playwright

    want = expected_scores(*load_classifier(full_run), TEXTS[0])
    best = max(want, key=want.get)
    _, demo = launch(full_run, tmp_path / "space")
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                page = browser.new_page()
                page.goto(demo.local_url)
                page.locator("#text textarea").fill(TEXTS[0])
                page.get_by_role("button", name="Classify").click()
                scores = page.locator("#scores")
                expect(scores).to_contain_text(best, timeout=60_000)
                for label, p in want.items():  # one bar per label, with its percentage
                    expect(scores).to_contain_text(label)
                    expect(scores).to_contain_text(f"{math.floor(100 * p + 0.5)}%")  # JS Math.round
                footer = page.get_by_text("Runs on CPU.")
                expect(footer).to_have_text(
                    f"Runs on CPU. Inputs are limited to {MAX_INPUT_CHARS} characters."
                )  # a classifier generates no tokens: no new-token cap is mentioned
                page.screenshot(path=tmp_path / "classification.png", full_page=True)
            finally:
                browser.close()
    finally:
        demo.close()
    assert (tmp_path / "classification.png").stat().st_size > 10_000


# ----------------------------------------------------------------------- fresh environment
@pytest.mark.slow
def test_adapter_space_from_hub_runs_without_hfattn(
    hub_server, lora_run, tiny_base, fresh_python, tmp_path
):
    """The pushed adapter + Space, downloaded and started like on Spaces (``python app.py``)
    in an environment without hfattn: the base model comes from the Hub, the head is built
    for the adapter's labels, and the scores are those of base + adapter."""
    serve_base(hub_server, tiny_base)
    assert cli_main(["push", str(lora_run), "--repo-id", "tester/genre-e2e", "--space"]) == 0
    with space_from_hub(hub_server, "tester/genre-e2e", fresh_python, tmp_path) as (space, url):
        assert "peft" in (space / "requirements.txt").read_text().split()
        scores, attention = Client(url, verbose=False).predict(TEXTS[0], api_name="/classify")
    check_scores(scores, expected_scores(*load_classifier(lora_run, tiny_base), TEXTS[0]))
    assert attention is None
    assert hub_server.resolved(BASE_ID, "model.safetensors")
    assert hub_server.resolved("tester/genre-e2e", "labels.json")
