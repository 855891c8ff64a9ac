"""The contracts every ``transformers`` model keeps, checked on every family of
``model_testers.TESTERS`` (skipped, with the reason, where one lacks a contract):
``torch.compile`` and ``torch.export`` against eager, and training (gradient checkpointing, the
``Trainer`` with accumulation, LoRA through PEFT).
"""

from __future__ import annotations

import pytest
import torch

from tests.helpers.model_testers import (
    ModelTester,
    assert_same_outputs,
    by_tester,
    forward,
    skip_if_lacking,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


# --------------------------------------------------------------------------- compile / export


def export_inputs(tester: ModelTester) -> dict:
    batch = tester.inputs()
    if tester.kind != "classification":
        batch["use_cache"] = False
    return batch


@by_tester
def test_torch_compile_matches_eager(tester):
    """Every family's forward compiles in one graph (``fullgraph=True``: a graph break
    raises), which gives the eager outputs. TorchDynamo decides graphs and breaks before any
    backend, so the ``eager`` backend runs its graph as captured; AOTAutograd's forward and
    backward are checked for the families that train compiled (``tests/training/``).
    ``_can_compile_fullgraph`` says more (generation with a static cache and a compiled
    decoding step): see ``test_a_static_cache_is_honoured_or_refused_in_one_line``."""
    model = tester.model()
    batch = export_inputs(tester)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    assert_same_outputs(tester, forward(compiled, batch), forward(model, batch))


@by_tester
def test_torch_export_matches_eager(tester):
    model = tester.model()
    batch = export_inputs(tester)
    program = torch.export.export(model, args=(), kwargs=batch, strict=False)
    exported = program.module()(**batch)
    logits = exported["logits"] if isinstance(exported, dict) else exported.logits
    torch.testing.assert_close(logits, forward(model, batch).logits, atol=1e-5, rtol=1e-4)


# --------------------------------------------------------------------------- training


def loss_and_gradients(model, batch: dict) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad()
    loss = model(**batch).loss
    loss.backward()
    return loss.detach(), {
        n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None
    }


@by_tester
@pytest.mark.parametrize("reentrant", [False, True], ids=["non-reentrant", "reentrant"])
def test_gradient_checkpointing_gives_the_same_gradients(tester, reentrant):
    skip_if_lacking(tester, "gradient_checkpointing")
    model = tester.model().train()
    assert model.supports_gradient_checkpointing, f"{tester.name} does not claim checkpointing"
    batch = tester.inputs(labels=True)
    loss, grads = loss_and_gradients(model, batch)
    if reentrant:  # the v5 name, and the deprecated alias users of v4 reach for
        model.activation_checkpointing_enable({"use_reentrant": True})
    else:
        with pytest.warns(FutureWarning, match="deprecated"):
            model.gradient_checkpointing_enable({"use_reentrant": False})
    assert model.is_activation_checkpointing
    if reentrant:
        model.enable_input_require_grads()
    loss_ckpt, grads_ckpt = loss_and_gradients(model, batch)
    torch.testing.assert_close(loss_ckpt, loss)
    assert grads_ckpt.keys() == grads.keys()
    for name in grads:
        torch.testing.assert_close(grads_ckpt[name], grads[name], atol=1e-6, rtol=1e-5)


@by_tester
def test_trainer_with_accumulation_and_checkpointing_steps_like_one_big_batch(tester, tmp_path):
    """Batch 4 in one step against 2 × 2 accumulated (with activation checkpointing where
    the family has it, as ``TrainingArguments(activation_checkpointing=True)`` asks)."""
    from datasets import Dataset
    from transformers import Trainer, TrainingArguments, default_data_collator

    batch = tester.inputs(lengths=(6, 6, 6, 6), labels=True)
    batch.pop("attention_mask")
    rows = Dataset.from_dict({k: v.tolist() for k, v in batch.items()})
    weights = []
    checkpointing = "gradient_checkpointing" not in tester.lacks
    for per_device, accumulation in ((4, 1), (2, 2)):
        model = tester.model().train()
        args = TrainingArguments(
            output_dir=str(tmp_path / f"b{per_device}"),
            per_device_train_batch_size=per_device,
            gradient_accumulation_steps=accumulation,
            activation_checkpointing=checkpointing and accumulation > 1,
            max_steps=1,
            learning_rate=0.05,
            optim="sgd",
            lr_scheduler_type="constant",
            report_to=[],
            use_cpu=True,
            save_strategy="no",
            disable_tqdm=True,
        )
        Trainer(model, args, train_dataset=rows, data_collator=default_data_collator).train()
        assert model.is_activation_checkpointing == (checkpointing and accumulation > 1)
        weights.append({n: p.detach().clone() for n, p in model.named_parameters()})
    start = dict(tester.model().named_parameters())
    assert any(not torch.equal(weights[0][n], start[n]) for n in start)
    for name in weights[0]:
        torch.testing.assert_close(weights[1][name], weights[0][name], atol=1e-6, rtol=1e-5)


@by_tester
def test_lora_wraps_trains_saves_and_reloads(tester, tmp_path):
    from peft import LoraConfig, PeftModel, get_peft_model

    batch = tester.inputs(labels=True)
    base_output = forward(tester.model(), batch).logits
    lora = get_peft_model(tester.model(), LoraConfig(r=2, target_modules=tester.lora_targets))
    torch.testing.assert_close(forward(lora, batch).logits, base_output)  # B starts at zero
    trainable = [n for n, p in lora.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    optimizer = torch.optim.SGD([p for p in lora.parameters() if p.requires_grad], lr=0.5)
    lora.train()
    lora(**batch).loss.backward()
    optimizer.step()
    lora.eval()
    tuned = forward(lora, batch).logits
    assert not torch.allclose(tuned, base_output)
    lora.save_pretrained(tmp_path)
    assert (tmp_path / "adapter_model.safetensors").exists()
    reloaded = PeftModel.from_pretrained(tester.model(), tmp_path).eval()
    torch.testing.assert_close(forward(reloaded, batch).logits, tuned)
    merged = reloaded.merge_and_unload()
    assert type(merged) is tester.model_class
    torch.testing.assert_close(forward(merged, batch).logits, tuned, atol=1e-5, rtol=1e-4)
