"""Publishing to a local Hub: a LoRA adapter is pushed as an adapter or merged into its base
model (a merged push over the adapter leaves no adapter file), and a recipe's ``hub:`` section
publishes the run at the end of training."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from huggingface_hub import ModelCard

from hfattn.hub import HubPushError, push_model_folder

pytestmark = pytest.mark.usefixtures("fast_retries")  # of conftest.py


# ------------------------------------------------------------------------- LoRA adapters
@pytest.fixture
def lora_run(tmp_path) -> tuple[Path, Path]:
    """A tiny GPT-2 base folder and a LoRA adapter run folder trained on top of it."""
    peft = pytest.importorskip("peft", reason="peft is not installed: LoRA publishing is untested")
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from hfattn.tokenization.characters import build_char_tokenizer

    torch.manual_seed(0)
    tokenizer = build_char_tokenizer("abcdefghijklmnopqrstuvwxyz ROMEO:")
    base = GPT2LMHeadModel(
        GPT2Config(
            n_layer=1,
            n_embd=16,
            n_head=2,
            vocab_size=len(tokenizer),
            n_positions=64,
            bos_token_id=2,
            eos_token_id=3,
        )
    )
    base.save_pretrained(tmp_path / "base")
    tokenizer.save_pretrained(tmp_path / "base")
    config = peft.LoraConfig(
        task_type="CAUSAL_LM", r=2, lora_alpha=4, target_modules=["c_attn"], fan_in_fan_out=True
    )
    model = peft.get_peft_model(GPT2LMHeadModel.from_pretrained(tmp_path / "base"), config)
    for name, param in model.named_parameters():
        if "lora_B" in name:  # as if trained: B starts at zero, which would make merging a no-op
            torch.nn.init.normal_(param, std=0.5)
    run = tmp_path / "lora_run"
    model.save_pretrained(run)
    tokenizer.save_pretrained(run)
    (run / "recipe.yaml").write_text(
        "name: lora_test\nhub:\n  base_model: openai-community/gpt2\n  license: mit\n"
    )
    return tmp_path / "base", run


def test_lora_adapter_is_pushed_as_adapter(hub_server, lora_run):
    _, run = lora_run
    push_model_folder(run, "tester/lora")
    files = set(hub_server.files("tester/lora"))
    assert {
        "adapter_config.json",
        "adapter_model.safetensors",
        "README.md",
        "tokenizer.json",
    } <= files
    assert "model.safetensors" not in files
    base = hub_server.revision_dir("tester/lora")
    card = ModelCard.load(base / "README.md")
    assert card.data.base_model == "openai-community/gpt2"
    assert card.data.library_name == "peft"
    assert "lora" in card.data.tags and "PeftModel.from_pretrained" in card.text
    adapter_config = json.loads((base / "adapter_config.json").read_text())
    assert adapter_config["base_model_name_or_path"] == "openai-community/gpt2"


def test_lora_merge_publishes_the_merged_model(lora_run, tmp_path, monkeypatch):
    import peft
    import torch
    from transformers import AutoModelForCausalLM

    monkeypatch.delenv("HF_TOKEN", raising=False)
    base_dir, run = lora_run
    push_model_folder(run, "tester/lora-merged", merge=True, dry_run_dir=tmp_path / "dry")
    staged = tmp_path / "dry" / "model"
    names = {p.name for p in staged.iterdir()}
    assert {"config.json", "model.safetensors", "README.md", "tokenizer.json"} <= names
    assert not names & {"adapter_config.json", "adapter_model.safetensors"}
    merged = AutoModelForCausalLM.from_pretrained(staged).eval()
    reference = peft.PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(base_dir), run
    ).eval()
    ids = torch.tensor([[4, 5, 6, 7, 8]])
    with torch.no_grad():
        torch.testing.assert_close(merged(ids).logits, reference(ids).logits, atol=1e-5, rtol=1e-5)
        plain = AutoModelForCausalLM.from_pretrained(base_dir)(ids).logits
    assert not torch.allclose(merged(ids).logits, plain, atol=1e-3)  # the adapter changed it
    card = ModelCard.load(staged / "README.md")
    assert card.data.base_model == "openai-community/gpt2"
    assert card.data.library_name == "transformers" and "lora-merged" in card.data.tags
    assert "trust_remote_code" not in card.text  # GPT-2 is built into transformers


def test_merge_refused_for_full_model(char_rnn_run, tmp_path):
    with pytest.raises(HubPushError, match="--merge applies to LoRA adapter folders"):
        push_model_folder(char_rnn_run, "tester/x", merge=True, dry_run_dir=tmp_path / "d")


def test_a_merged_push_over_the_adapter_leaves_no_adapter_file(hub_server, lora_run, caplog):
    """The adapter pushed first, then the merged model to the same repository: the one commit
    of the second push deletes the adapter's files, so ``from_pretrained`` of the repository
    loads the merged model and nothing stale."""
    from transformers import AutoModelForCausalLM

    _, run = lora_run
    push_model_folder(run, "tester/lora-then-merged")
    assert "adapter_config.json" in hub_server.files("tester/lora-then-merged")
    with caplog.at_level(logging.INFO, logger="hfattn.hub.push"):
        push_model_folder(run, "tester/lora-then-merged", merge=True)
    files = set(hub_server.files("tester/lora-then-merged"))
    assert not files & {"adapter_config.json", "adapter_model.safetensors"}
    assert {"config.json", "model.safetensors", "README.md"} <= files
    assert len(hub_server.repo("tester/lora-then-merged").commits) == 2
    assert "adapter_config.json, adapter_model.safetensors" in caplog.text
    loaded = AutoModelForCausalLM.from_pretrained(
        hub_server.revision_dir("tester/lora-then-merged")
    )
    assert type(loaded).__name__ == "GPT2LMHeadModel"


# --------------------------------------------------------------- push at the end of training
def test_recipe_push_to_hub_publishes_the_finished_run(hub_server, tmp_path):
    from hfattn.orchestration.run import run_recipe
    from hfattn.recipes import load_recipe
    from tests.helpers.recipe_helpers import write_recipe

    recipe = write_recipe(
        tmp_path,
        training={"max_steps": 4, "eval_every": 4},
        evaluation={"splits": ["test"]},
        hub={
            "push_to_hub": True,
            "repo_id": "tester/from-recipe",
            "tags": ["tiny"],
            "license": "mit",
        },
    )
    run_recipe(load_recipe(recipe))
    files = set(hub_server.files("tester/from-recipe"))
    assert {"model.safetensors", "config.json", "modeling_char_rnn.py", "README.md"} <= files
    assert not any(f.startswith("checkpoints/") for f in files)
    card = ModelCard.load(hub_server.revision_dir("tester/from-recipe") / "README.md")
    recorded = json.loads((tmp_path / "run" / "eval_results.json").read_text())
    assert [r.metric_value for r in card.data.eval_results] == [
        r["value"] for r in recorded["results"]
    ]
    assert "tiny" in card.data.tags
