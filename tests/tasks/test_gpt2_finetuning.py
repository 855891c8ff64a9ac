"""GPT-2 causal-LM fine-tuning, full and LoRA: the real recipes (recipes/gpt2_shakespeare*.yaml)
run on a tiny random ``GPT2LMHeadModel`` with a byte-level BPE tokenizer trained here
(``tests/helpers/tiny_pretrained.py``), since the Hub cannot be reached.

Checked: block packing, the loss going down, bits per character as total nats over the
characters of the held-out text, LoRA training only the adapter (base weights bitwise
unchanged, the trainable count of the LoRA formula), the adapter and merged folders giving the
trained model's logits, ``hfattn generate`` on both kinds of run, pushing with ``base_model``
in the card, and the errors for a bad LoRA target / model id / tokenizer section.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from hfattn.batching.lm import PackedBlocks, count_characters, encode_corpus
from hfattn.cli import main as cli_main
from hfattn.data.shakespeare import play_text
from hfattn.orchestration.run import build_job, run_recipe
from hfattn.recipes import load_recipe
from hfattn.recipes.schema import RecipeError
from tests.helpers.network import connections
from tests.helpers.tiny_pretrained import tiny_gpt2_folder

peft = pytest.importorskip("peft", reason="peft is not installed: LoRA fine-tuning is untested")

RECIPES = Path(__file__).parents[2] / "recipes"
FULL, LORA = RECIPES / "gpt2_shakespeare.yaml", RECIPES / "gpt2_shakespeare_lora.yaml"
HUB_BASE = "openai-community/gpt2"
STEPS = 30
HELD_OUT_TAIL = (
    "\n\nLADY MACBETH:\nSeñor, the café is closed — ’tis naïve to wait.\n"
    "Out, damnèd spot! out, I say!—One: two: why, then, ’tis time to do’t.\n"
)
"""Ends the corpus file, so the test split holds multi-byte characters (byte-level BPE may
split them across tokens: bits per char must still count each character once)."""


def _fractions(n: int) -> tuple[int, int]:
    """``(n_train, n_validation)`` of the 10 % / 10 % tail split, written out here."""
    n_test, n_val = int(n * 0.1), int(n * 0.1)
    return n - n_val - n_test, n_val


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("gpt2_data") / "plays.txt"
    path.write_text(play_text("macbeth")[:24_000] + HELD_OUT_TAIL, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def base_folder(tmp_path_factory) -> Path:
    return tiny_gpt2_folder(tmp_path_factory.mktemp("gpt2_base"), initializer_range=0.2)


def _overrides(base: Path, corpus: Path, out: Path, **extra) -> list[str]:
    settings = {
        "model.pretrained": str(base),
        "data.source": str(corpus),
        "data.validation_fraction": 0.1,
        "data.test_fraction": 0.1,
        "output_dir": str(out),
        "training.block_size": 32,
        "training.batch_size": 8,
        "training.max_steps": STEPS,
        "training.max_minutes": "null",
        "training.warmup_steps": 3,
        "training.log_every": 5,
        "training.eval_every": 15,
        "training.save_every": 15,
        "training.keep_checkpoints": 2,
        "evaluation.batch_size": 4,
        "evaluation.seq_len": 32,
        "generation.max_new_tokens": 12,
        "hub.base_model": HUB_BASE,  # a local copy of a Hub model names it for the card
        **extra,
    }
    return [f"{key}={value}" for key, value in settings.items()]


@pytest.fixture(scope="module")
def full_run(base_folder, corpus, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gpt2_full") / "run"
    recipe = load_recipe(
        FULL, _overrides(base_folder, corpus, out, **{"training.learning_rate": 3e-3})
    )
    run_recipe(recipe)
    return out


@pytest.fixture(scope="module")
def lora_run(base_folder, corpus, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gpt2_lora") / "run"
    recipe = load_recipe(
        LORA, _overrides(base_folder, corpus, out, **{"training.learning_rate": 1e-2})
    )
    run_recipe(recipe)
    return out


def _train_losses(run: Path) -> list[float]:
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [r["loss"] for r in records if r["split"] == "train"]


def _test_text(corpus: Path) -> str:
    text = corpus.read_text(encoding="utf-8")
    n_train, n_val = _fractions(len(text))
    return text[n_train + n_val :]


def _nats_by_windows(model, ids: torch.LongTensor, window: int) -> float:
    """Σ −ln p over ``ids[1:]``, each ``window``-token slice scored on its own (one stream)."""
    total = 0.0
    with torch.no_grad():
        for start in range(0, len(ids) - 1, window):
            chunk = ids[start : start + window + 1]
            logp = torch.log_softmax(model(chunk[None, :-1]).logits[0].double(), -1)
            total -= logp.gather(1, chunk[1:, None]).sum().item()
    return total


# ---- data ----------------------------------------------------------------------------------
def test_packed_blocks_tile_the_corpus_once_per_epoch():
    ids = torch.arange(20 * 16 + 2)  # 20 blocks of 16 inputs (+1 target), 5 batches of 4
    blocks = PackedBlocks(ids, batch_size=4, block_size=16, seed=3)
    epoch0 = torch.cat(list(blocks.epoch(0)))
    assert epoch0.shape[1] == 17  # 16 inputs + the next token as the last target
    assert torch.equal(
        epoch0[:, 1:] - epoch0[:, :-1], torch.ones(len(epoch0), 16, dtype=torch.long)
    )
    starts = sorted(epoch0[:, 0].tolist())
    assert starts == list(range(0, 16 * 20, 16))  # consecutive blocks tiling the corpus
    assert len(blocks) == 5
    assert torch.equal(epoch0, torch.cat(list(blocks.epoch(0))))  # deterministic per epoch
    assert not torch.equal(epoch0[:, 0], torch.cat(list(blocks.epoch(1)))[:, 0])  # reshuffled


def test_count_characters_counts_each_character_once(base_folder):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base_folder)
    docs = ["ROMEO:\nBut, soft!", HELD_OUT_TAIL]
    ids = encode_corpus(tokenizer, docs, tokenizer.eos_token_id)
    assert ids[0] == tokenizer.eos_token_id
    assert len(ids) < sum(map(len, docs))  # subwords: fewer tokens than characters
    # two separators (one character each) + every character of the text
    assert count_characters(tokenizer, ids) == 2 + sum(len(d) for d in docs)


# ---- full fine-tune ------------------------------------------------------------------------
def test_full_finetune_trains_and_saves_a_gpt2_folder(full_run, base_folder):
    losses = _train_losses(full_run)
    assert len(losses) == STEPS // 5 and losses[-1] < losses[0] - 0.5
    config = json.loads((full_run / "config.json").read_text())
    assert config["architectures"] == ["GPT2LMHeadModel"]
    tokenizer_config = json.loads((full_run / "tokenizer_config.json").read_text())
    assert tokenizer_config["pad_token"] == tokenizer_config["eos_token"] == "<|endoftext|>"
    assert config["pad_token_id"] == config["eos_token_id"]
    assert not (full_run / "adapter_config.json").exists()
    weights, base = (
        load_file(full_run / "model.safetensors"),
        load_file(base_folder / "model.safetensors"),
    )
    assert not torch.equal(
        weights["transformer.h.0.attn.c_attn.weight"], base["transformer.h.0.attn.c_attn.weight"]
    )
    results = json.loads((full_run / "eval_results.json").read_text())
    names = {r["metric_type"]: r["metric_name"] for r in results["results"]}
    assert names["loss"] == "Loss (nats/token)" and names["bits_per_char"] == "Bits per character"


def test_bits_per_char_is_total_nats_over_characters(full_run, corpus):
    """Scored with one stream, every token after the separator is a target: bits per char is
    Σ nats over the held-out text / its character count / ln 2, recomputed here window by
    window with the saved model."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from hfattn.tasks.causal_lm.task import TASK

    recipe = load_recipe(full_run / "recipe.yaml", ["evaluation.batch_size=1"])
    scores = TASK.evaluate_folder(full_run, recipe, ["test"])["test"]
    text = _test_text(corpus)
    tokenizer = AutoTokenizer.from_pretrained(full_run)
    model = AutoModelForCausalLM.from_pretrained(full_run).eval()
    ids = torch.tensor([tokenizer.eos_token_id, *tokenizer(text)["input_ids"]])
    nats = _nats_by_windows(model, ids, window=32)
    assert scores["num_chars"] == len(text) and scores["num_tokens"] == len(ids) - 1
    assert scores["bits_per_char"] == pytest.approx(nats / len(text) / math.log(2), rel=1e-5)
    assert scores["loss"] == pytest.approx(nats / (len(ids) - 1), rel=1e-5)
    assert scores["bits_per_char"] < scores["loss"] / math.log(2)  # > 1 character per token

    recorded = json.loads((full_run / "eval_results.json").read_text())["all_metrics"]["test"]
    assert recorded["bits_per_char"] == pytest.approx(
        recorded["loss"] * recorded["num_tokens"] / recorded["num_chars"] / math.log(2), rel=1e-9
    )


# ---- LoRA ----------------------------------------------------------------------------------
def test_lora_trains_only_the_adapter(lora_run, base_folder, corpus, tmp_path):
    from hfattn.tasks.pretrained import trainable_parameters

    losses = _train_losses(lora_run)
    assert losses[-1] < losses[0] - 0.3
    assert {"adapter_config.json", "adapter_model.safetensors", "tokenizer.json"} <= {
        p.name for p in lora_run.iterdir()
    }
    assert not (lora_run / "config.json").exists() and not (lora_run / "model.safetensors").exists()
    adapter_config = json.loads((lora_run / "adapter_config.json").read_text())
    assert adapter_config["base_model_name_or_path"] == str(base_folder)
    assert sorted(adapter_config["target_modules"]) == ["c_attn", "c_proj"]
    assert adapter_config["fan_in_fan_out"] is True

    # LoRA adds r·(fan_in + fan_out) per targeted layer: c_attn d→3d, attn.c_proj d→d,
    # mlp.c_proj 4d→d, i.e. 11·r·d per block
    base_config = json.loads((base_folder / "config.json").read_text())
    d, layers, r = base_config["n_embd"], base_config["n_layer"], 8
    expected = layers * r * (4 * d + 2 * d + 5 * d)
    adapter = load_file(lora_run / "adapter_model.safetensors")
    assert sum(t.numel() for t in adapter.values()) == expected
    assert all("lora_A" in k or "lora_B" in k for k in adapter)
    assert all(t.abs().sum() > 0 for k, t in adapter.items() if "lora_B" in k)  # trained
    job = build_job(load_recipe(LORA, _overrides(base_folder, corpus, tmp_path / "x")))
    base_total = sum(t.numel() for k, t in load_file(base_folder / "model.safetensors").items())
    assert trainable_parameters(job.model) == (expected, base_total + expected)

    # the checkpoint holds the whole wrapped model: its base weights are the base folder's
    checkpoint = sorted((lora_run / "checkpoints").glob("step-*"))[-1]
    state = load_file(checkpoint / "model.safetensors")
    base = load_file(base_folder / "model.safetensors")
    compared = 0
    for key, value in state.items():
        if "lora_" in key:
            continue
        name = key.removeprefix("base_model.model.").replace(".base_layer", "")
        if name in base:
            assert torch.equal(value, base[name]), name  # bitwise unchanged
            compared += 1
    assert compared == len(base) - ("lm_head.weight" in base)  # lm_head is tied to wte


def test_adapter_and_merged_folders_give_the_trained_logits(lora_run, base_folder, tmp_path):
    """The adapter reloaded with peft reproduces the test loss the run recorded, and the
    merged export gives the adapter's logits."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from hfattn.evaluation.language_modeling import evaluate_causal_lm
    from hfattn.hub import push_model_folder

    tokenizer = AutoTokenizer.from_pretrained(lora_run)
    base = AutoModelForCausalLM.from_pretrained(base_folder)
    adapted = peft.PeftModel.from_pretrained(base, str(lora_run)).eval()
    recipe = load_recipe(lora_run / "recipe.yaml")
    text = Path(recipe.data.source).read_text(encoding="utf-8")
    n_train, n_val = _fractions(len(text))
    ids = encode_corpus(tokenizer, [text[n_train + n_val :]], tokenizer.eos_token_id)
    scores = evaluate_causal_lm(adapted, ids, batch_size=4, seq_len=32, tokenizer=tokenizer)
    recorded = json.loads((lora_run / "eval_results.json").read_text())["all_metrics"]["test"]
    assert scores["loss"] == pytest.approx(recorded["loss"], rel=1e-6)
    assert scores["bits_per_char"] == pytest.approx(recorded["bits_per_char"], rel=1e-6)

    push_model_folder(lora_run, "tester/gpt2-merged", merge=True, dry_run_dir=tmp_path / "dry")
    staged = tmp_path / "dry" / "model"
    assert (staged / "model.safetensors").is_file() and not (
        staged / "adapter_config.json"
    ).exists()
    merged = AutoModelForCausalLM.from_pretrained(staged).eval()
    x = ids[None, :64]
    with torch.no_grad():
        torch.testing.assert_close(merged(x).logits, adapted(x).logits, atol=1e-5, rtol=1e-5)
        plain = AutoModelForCausalLM.from_pretrained(base_folder).eval()  # `base` is wrapped
        assert not torch.allclose(merged(x).logits, plain(x).logits, atol=1e-3)


def test_generate_cli_on_full_and_lora_runs(full_run, lora_run, base_folder, capsys):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from hfattn.tasks.causal_lm.inference import generate_text

    base = AutoModelForCausalLM.from_pretrained(base_folder)
    models = {
        full_run: AutoModelForCausalLM.from_pretrained(full_run),
        lora_run: peft.PeftModel.from_pretrained(base, str(lora_run)),
    }
    for run, model in models.items():
        assert (
            cli_main(
                ["generate", str(run), "--prompt", "ROMEO:\n", "--max-new-tokens", "15", "--greedy"]
            )
            == 0
        )
        out = capsys.readouterr().out
        tokenizer = AutoTokenizer.from_pretrained(run)
        expected = generate_text(
            model.eval(), tokenizer, "ROMEO:\n", max_new_tokens=15, do_sample=False
        )
        assert out == expected + "\n"  # print()'s newline
        assert expected.startswith("ROMEO:\n") and len(expected) > len("ROMEO:\n")


def test_push_full_and_adapter_name_the_base_model(hub_server, full_run, lora_run):
    from huggingface_hub import ModelCard

    from hfattn.hub import push_model_folder

    push_model_folder(full_run, "tester/gpt2-shakespeare")
    push_model_folder(lora_run, "tester/gpt2-shakespeare-lora")
    full = ModelCard.load(hub_server.revision_dir("tester/gpt2-shakespeare") / "README.md")
    assert full.data.base_model == HUB_BASE and full.data.library_name == "transformers"
    assert {"model.safetensors", "config.json"} <= set(hub_server.files("tester/gpt2-shakespeare"))
    adapter_dir = hub_server.revision_dir("tester/gpt2-shakespeare-lora")
    card = ModelCard.load(adapter_dir / "README.md")
    assert card.data.base_model == HUB_BASE and card.data.library_name == "peft"
    assert (
        json.loads((adapter_dir / "adapter_config.json").read_text())["base_model_name_or_path"]
        == HUB_BASE
    )
    assert "model.safetensors" not in hub_server.files("tester/gpt2-shakespeare-lora")
    results = {(r.dataset_split, r.metric_type) for r in card.data.eval_results}
    assert ("test", "bits_per_char") in results


def test_card_shows_the_sample_generated_after_training(hub_server, full_run):
    """The run's sample (``samples.md``) is the saved model's continuation of the recipe's
    prompt with its generation settings, and the pushed card shows it."""
    from huggingface_hub import ModelCard
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from hfattn.hub import push_model_folder
    from hfattn.tasks.causal_lm.inference import generate_text

    generation = load_recipe(full_run / "recipe.yaml").generation
    model = AutoModelForCausalLM.from_pretrained(full_run).eval()
    text = generate_text(
        model, AutoTokenizer.from_pretrained(full_run), "ROMEO:\n", **generation.generate_kwargs()
    )
    written = (full_run / "samples.md").read_text(encoding="utf-8")
    assert f"```text\n{text}\n```" in written and '"ROMEO:\\n"' in written
    assert "temperature 0.8" in written and "top_k 50" in written
    push_model_folder(full_run, "tester/gpt2-sampled")
    card = ModelCard.load(hub_server.revision_dir("tester/gpt2-sampled") / "README.md").text
    assert card.index("## Samples") < card.index("## Intended use")
    assert text in card
    assert "samples.md" not in hub_server.files("tester/gpt2-sampled")


def test_lora_run_resumes_to_the_same_adapter(lora_run, base_folder, corpus, tmp_path):
    """Stopped at step 10 and resumed, a LoRA run ends with the uninterrupted run's adapter."""
    out = tmp_path / "run"
    recipe = load_recipe(
        LORA, _overrides(base_folder, corpus, out, **{"training.learning_rate": 1e-2})
    )

    def stop_at_10(progress):
        if progress.step == 10:
            progress.stop.request("interrupted")

    assert run_recipe(recipe, callbacks=[stop_at_10]).interrupted
    assert not (out / "adapter_model.safetensors").exists()
    run_recipe(recipe, resume=True)
    resumed, straight = (
        load_file(out / "adapter_model.safetensors"),
        load_file(lora_run / "adapter_model.safetensors"),
    )
    assert resumed.keys() == straight.keys()
    for key in straight:
        torch.testing.assert_close(resumed[key], straight[key], atol=1e-6, rtol=1e-5)


# ---- errors --------------------------------------------------------------------------------
def test_lora_target_that_does_not_exist_lists_the_linear_layers(base_folder, corpus, tmp_path):
    recipe = load_recipe(
        LORA, [*_overrides(base_folder, corpus, tmp_path / "x"), "lora.target_modules=[q_proj]"]
    )
    with pytest.raises(
        RecipeError, match=r"lora\.target_modules: 'q_proj' is not a linear layer"
    ) as err:
        build_job(recipe)
    assert "c_attn, c_proj, c_fc" in str(err.value)


def test_unreachable_model_id_is_a_quick_model_pretrained_error(monkeypatch, corpus, tmp_path):
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    recipe = load_recipe(FULL, [f"data.source={corpus}", f"output_dir={tmp_path / 'x'}"])
    assert recipe.model == {"pretrained": HUB_BASE}
    recipe.model = {"pretrained": "nobody-here/no-such-model"}
    with (
        connections() as attempts,
        pytest.raises(
            RecipeError, match=r"^model\.pretrained: 'nobody-here/no-such-model' is neither"
        ),
    ):
        build_job(recipe)
    assert attempts == []  # offline: no request, no retries
    missing = tmp_path / "no_such_folder" / "gpt2"
    with pytest.raises(RecipeError, match=r"^model\.pretrained"):
        build_job(load_recipe(FULL, [f"model.pretrained={missing}", f"data.source={corpus}"]))


@pytest.mark.parametrize(
    ("setting", "field", "message"),
    [
        ("tokenizer.type=char", "tokenizer.type", "brings its own tokenizer"),
        ("tokenizer.min_frequency=2", "tokenizer.min_frequency", "char tokenizer only"),
        (
            "training.mode=stateful training.block_size=256",
            "training.mode",
            "stateful needs a recurrent model",
        ),
        ("training.block_size=512", "training.block_size", "exceed the 128-token context"),
        ("evaluation.seq_len=129", "evaluation.seq_len", "exceed the 128-token context"),
    ],
)
def test_recipe_fields_that_do_not_fit_gpt2(base_folder, corpus, tmp_path, setting, field, message):
    """The tokenizer fields are refused when the recipe loads; the others once the model's
    context is known."""
    with pytest.raises(RecipeError, match=rf"^{field}: .*{message}"):
        build_job(load_recipe(FULL, [*_overrides(base_folder, corpus, tmp_path / "x"),
                                     *setting.split()]))  # fmt: skip


def test_lora_on_a_model_trained_from_scratch_is_refused(tmp_path):
    from tests.helpers.recipe_helpers import write_recipe

    path = write_recipe(tmp_path, lora={"r": 4, "target_modules": ["lm_head"]})
    with pytest.raises(RecipeError, match=r"^lora: applies to a pretrained model"):
        load_recipe(path)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_text_from_a_table_file(tmp_path, suffix):
    """A local csv / jsonl file is read through ``datasets``: its ``text_column`` rows joined by
    newlines, then split 80 / 10 / 10 like a text file."""
    import pandas as pd

    from hfattn.data.text import load_text_splits

    rows = [f"line {i}: to be or not to be" for i in range(40)]
    path = tmp_path / f"lines{suffix}"
    frame = pd.DataFrame({"id": range(40), "line": rows})
    if suffix == ".csv":
        frame.to_csv(path, index=False)
    else:
        frame.to_json(path, orient="records", lines=True)
    splits = load_text_splits(
        str(path), text_column="line", validation_fraction=0.1, test_fraction=0.1
    )
    text = "\n".join(rows)
    n_train, n_val = _fractions(len(text))
    assert splits == {
        "train": [text[:n_train]],
        "validation": [text[n_train : n_train + n_val]],
        "test": [text[n_train + n_val :]],
    }
    with pytest.raises(ValueError, match=r"^data\.text_column: 'text' is not a column .*id, line"):
        load_text_splits(str(path))
