"""The engine's CUDA choices, tested on the CPU: fused AdamW, ``training.compile: auto``, batch
widths rounded up when compiled, the MFU arithmetic, the step that does not wait for the device
and the speed fields of ``metrics.jsonl`` / ``eval_results.json``."""

import json
import time
from pathlib import Path

import pytest
import torch

import hfattn.training.engine as engine
from hfattn.batching.seq2seq import PairBatches, pad_pairs, padded_width
from hfattn.cli import main
from hfattn.models import (
    CharRNNConfig,
    CharRNNForCausalLM,
    VaswaniConfig,
    VaswaniForConditionalGeneration,
)
from hfattn.recipes import load_recipe
from hfattn.recipes.schema import RecipeError
from hfattn.training.compiling import resolve_compile
from hfattn.training.muon import MuonAdamW, muon_param_groups
from hfattn.training.optim import adamw_kernel, build_optimizer
from hfattn.training.speed import Speedometer, floats
from hfattn.training.throughput import (
    FlopCounter,
    datasheet_peak,
    device_peak_flops,
    mfu,
    vaswani_training_flops,
)
from tests.helpers.fault_injection import nan_loss_at
from tests.helpers.recipe_helpers import write_recipe

RECIPES = Path(__file__).resolve().parents[2] / "recipes"


def char_rnn():
    torch.manual_seed(0)
    return CharRNNForCausalLM(CharRNNConfig(vocab_size=20, embedding_dim=8, hidden_size=16))


def tiny_vaswani(**overrides):
    torch.manual_seed(0)
    config = dict(
        vocab_size=40,
        encoder_layers=2,
        decoder_layers=1,
        d_model=16,
        num_heads=2,
        ffn_dim=24,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
    )
    return VaswaniForConditionalGeneration(VaswaniConfig(**{**config, **overrides}))


# ------------------------------------------------------------------------------ optimizer


def test_adamw_runs_fused_on_cuda_and_as_ever_elsewhere():
    assert adamw_kernel("cuda") == adamw_kernel(torch.device("cuda:1")) == {"fused": True}
    assert adamw_kernel("cpu") == {}
    for name in ("adamw", "muon"):
        on_cuda = build_optimizer(name, char_rnn(), lr=1e-3, device="cuda")
        assert {group["fused"] for group in on_cuda.param_groups} == {True}
        on_cpu = build_optimizer(name, char_rnn(), lr=1e-3)  # where the parameters are
        assert {group["fused"] for group in on_cpu.param_groups} == {None}
    assert "fused" not in build_optimizer("nadam", char_rnn(), lr=1e-3, device="cuda").defaults


def test_muon_adamw_groups_fused_make_the_same_update():
    """torch's fused AdamW kernel (it has a CPU one) on Muon's AdamW groups: the same weights
    as the default implementation, with the step count kept as a float32 tensor."""
    models = [char_rnn(), char_rnn()]
    optimizers = [
        MuonAdamW(muon_param_groups(model), lr=0.01, weight_decay=0.1, fused=fused)
        for model, fused in zip(models, (None, True), strict=True)
    ]
    ids = torch.randint(0, 20, (4, 9), generator=torch.Generator().manual_seed(1))
    for _ in range(3):
        for model, optimizer in zip(models, optimizers, strict=True):
            model(input_ids=ids, labels=ids).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    for a, b in zip(models[0].parameters(), models[1].parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    embedding = models[1].get_input_embeddings().weight
    step = optimizers[1].state[embedding]["step"]
    assert step.dtype == torch.float32 and float(step) == 3.0


# ------------------------------------------------------------------------------ compile


@pytest.mark.parametrize(
    ("setting", "model_type", "device", "compiled"),
    [
        ("auto", "vaswani", "cuda", False),
        ("auto", "char-rnn", "cuda:0", True),
        ("auto", "bahdanau", "cuda", False),
        ("auto", "vaswani", "cpu", False),
        (True, "vaswani", "cpu", True),
        ("regional", "vaswani", "cpu", True),
        (False, "vaswani", "cuda", False),
    ],
)
def test_compile_auto_is_on_for_the_char_rnn_on_cuda_only(setting, model_type, device, compiled):
    assert resolve_compile(setting, model_type, device) is compiled


def test_training_compile_takes_auto_true_false_or_regional():
    recipe = RECIPES / "bahdanau_dates_en_es.yaml"
    assert load_recipe(recipe).training.compile == "auto"  # and auto is off for bahdanau
    assert load_recipe(recipe, ["training.compile=false"]).training.compile is False
    vaswani = RECIPES / "vaswani_dates_en_es.yaml"
    assert load_recipe(vaswani, ["training.compile=regional"]).training.compile == "regional"
    match = r"^training\.compile: must be auto, true, false or regional"
    with pytest.raises(RecipeError, match=match):
        load_recipe(recipe, ["training.compile=sometimes"])
    for forced in ("true", "regional"):  # the recurrence would compile at every batch length
        with pytest.raises(RecipeError, match=r"^training\.compile: model.type bahdanau runs"):
            load_recipe(recipe, [f"training.compile={forced}"])


def test_widths_round_up_to_the_multiple_and_the_loss_does_not_change():
    assert [padded_width([3, 9], m) for m in (None, 1, 8, 16)] == [9, 9, 16, 16]
    sources = [[5, 6, 7, 2], [8, 9, 10, 11, 12, 13, 2], [14, 2]]
    targets = [[20, 21, 2], [22, 2], [23, 24, 25, 26, 27, 28, 29, 30, 31, 2]]
    batches = PairBatches(sources, targets, 3, pad_token_id=0)
    batches.round_widths(8)
    (rounded,) = batches.epoch(0)
    assert rounded["input_ids"].shape == (3, 8) and rounded["labels"].shape == (3, 16)
    tight = pad_pairs(sources, targets, 0)
    assert tight["input_ids"].shape == (3, 7) and tight["labels"].shape == (3, 10)
    model = tiny_vaswani().eval()
    losses = [model(**batch).loss for batch in (tight, pad_pairs(sources, targets, 0, 8))]
    torch.testing.assert_close(losses[1], losses[0], rtol=1e-6, atol=0)


# ------------------------------------------------------------------------------ throughput


@pytest.mark.parametrize(
    ("name", "kind", "peak"),
    [
        ("NVIDIA H100 80GB HBM3", "bf16", 989e12),
        ("NVIDIA H100 PCIe", "bf16", 756e12),
        ("NVIDIA H200", "bf16", 989e12),
        ("NVIDIA H100 80GB HBM3", "fp32", 67e12),
        ("NVIDIA A100-SXM4-80GB", "bf16", 312e12),
        ("NVIDIA A100 80GB PCIe", "tf32", 156e12),
        ("NVIDIA L4", "bf16", 121e12),
        ("NVIDIA A10", "bf16", 125e12),
        ("NVIDIA A10G", "bf16", None),
        ("NVIDIA H100 NVL", "bf16", None),
        ("NVIDIA GeForce RTX 4090", "bf16", None),
    ],
)
def test_datasheet_peaks_are_matched_on_the_device_name(name, kind, peak):
    assert datasheet_peak(name, kind) == peak


def test_a_cpu_has_no_peak_and_no_mfu():
    assert device_peak_flops("cpu", "bf16")[0] is None
    assert mfu(1e12, 2.0, None) is None
    assert mfu(3e12, 2.0, 1e12) == pytest.approx(1.5)


def test_the_transformer_flops_are_its_matrix_products():
    """Against the parameter count worked out by hand from the configuration."""
    d, f, v, heads, enc, dec = 16, 24, 40, 2, 2, 1
    model = tiny_vaswani()
    batch, source, target = 3, 7, 5
    attention = 4 * (d * d + d)  # q, k, v, o with biases
    ffn = d * f + f + f * d + d
    encoder_layer = attention + ffn + 2 * 2 * d  # two LayerNorms
    decoder_layer = 2 * attention + ffn + 3 * 2 * d
    cross_kv = 2 * (d * d + d)
    output = v * d + v
    dense = 6 * batch * (enc * encoder_layer * source
                         + (dec * (decoder_layer - cross_kv) + output) * target
                         + dec * cross_kv * source)  # fmt: skip
    scores = 12 * batch * d * (enc * source**2 + dec * (target**2 + target * source))
    assert heads * (d // heads) == d
    assert vaswani_training_flops(model, batch, source, target) == dense + scores
    ids = {"input_ids": torch.ones(batch, source, dtype=torch.long),
           "labels": torch.ones(batch, target, dtype=torch.long)}  # fmt: skip
    assert FlopCounter(model)(ids) == dense + scores


def test_other_models_count_six_flops_per_parameter_and_token():
    """Kaplan et al. 2020: 6 N T, N without the embedding table."""
    model = char_rnn()
    gru = 3 * (8 * 16 + 16 * 16 + 2 * 16)  # input, recurrent matrices and both biases
    head = 16 * 20 + 20
    assert FlopCounter(model)(torch.zeros(4, 10, dtype=torch.long)) == 6 * (gru + head) * 4 * 9


def test_data_wait_counts_the_time_spent_waiting_for_batches():
    def slow():
        for k in range(3):
            time.sleep(0.05)
            yield k

    speed = Speedometer()
    assert list(speed.timed(slow())) == [0, 1, 2]
    assert 0.15 <= speed.data_wait_s < 1.0
    speed.flops = 4e9
    fields = speed.interval(tokens=100, peak_flops=None)
    assert fields["mfu"] is None and fields["data_wait_s"] >= 0.15 and fields["tokens_per_s"] > 0
    assert speed.data_wait_s == 0.0 and speed.flops == 0.0 and speed.tokens == 100


def test_losses_are_read_in_one_go_with_the_same_numbers():
    tensors = [torch.tensor(0.1), torch.tensor(2.5)]
    assert floats([1.25, *tensors]) == [1.25, tensors[0].item(), tensors[1].item()]
    assert floats([0.5]) == [0.5]


# ------------------------------------------------------------------------------ a run


def test_a_run_reports_its_speed(tmp_path):
    recipe = write_recipe(tmp_path, training={"max_steps": 10, "log_every": 5,
                                              "eval_every": None, "save_every": None})  # fmt: skip
    assert main(["train", str(recipe)]) == 0
    run = tmp_path / "run"
    train = [json.loads(line) for line in (run / "metrics.jsonl").open()]
    train = [r for r in train if r["split"] == "train"]
    assert [r["step"] for r in train] == [5, 10]
    for record in train:
        assert record["tokens_per_s"] > 0 and record["data_wait_s"] >= 0
        assert record["mfu"] is None  # a CPU: no peak
        assert record["grad_norm"] > 0
    summary = json.loads((run / "eval_results.json").read_text())["training"]
    model = CharRNNForCausalLM.from_pretrained(run)
    non_embedding = sum(p.numel() for n, p in model.named_parameters() if "embed" not in n)
    assert summary["train_flops_per_token"] == 6 * non_embedding
    assert summary["mfu"] is None and summary["peak_flops_per_device"] is None
    assert summary["train_tokens_per_s"] > 0


def test_a_non_finite_loss_gathered_on_the_device_stops_at_the_next_check(
    tmp_path, monkeypatch, capsys
):
    """``on_nonfinite_loss: stop`` on an accelerator (forced here on the CPU): the NaN of
    batch 25 is found at the step-25 log (log_every 5), before any checkpoint holds it."""
    nan_loss_at(monkeypatch, {23})
    monkeypatch.setattr(engine, "checks_every_loss", lambda *args: False)
    recipe = write_recipe(tmp_path)
    assert main(["train", str(recipe)]) == 2
    err = capsys.readouterr().err
    assert "a training loss after step 20 (up to step 25, epoch 0) is not finite" in err
    assert "the last good checkpoint is" in err and "step-20" in err
    run = tmp_path / "run"
    assert not (run / "model.safetensors").exists()
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["best", "step-20"]


def test_the_model_card_gives_the_mfu_and_its_peak_only_where_there_is_one():
    from types import SimpleNamespace

    from hfattn.hub.card import _training_rows

    gpu = {
        "train_tokens_per_s": 5e5,
        "mfu": 0.3512,
        "peak_flops_per_device": 989e12,
        "peak_flops_source": "NVIDIA H100 80GB HBM3 bf16 dense, datasheet 989 TFLOP/s",
    }
    rows = dict(_training_rows(SimpleNamespace(training=gpu, recipe=None)))
    assert rows["Model FLOPs utilisation (MFU)"] == "35.1%"
    assert rows["Peak FLOP/s of the MFU"] == gpu["peak_flops_source"]
    assert "peak_flops_per_device" not in rows
    cpu = {"train_tokens_per_s": 900.0, "mfu": None, "peak_flops_per_device": None,
           "peak_flops_source": "no peak FLOP/s for a CPU"}  # fmt: skip
    rows = dict(_training_rows(SimpleNamespace(training=cpu, recipe=None)))
    assert not any("MFU" in label or "peak" in label for label in rows)
