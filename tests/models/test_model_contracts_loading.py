"""The contracts every ``transformers`` model keeps, checked on every hfattn family: the
configuration (round trips, refusals), saving and loading (safetensors, shards, dtypes, devices,
tied and resized embeddings), eager against SDPA attention from the saved folders, and loading
as remote code in a Python without hfattn.

Each test runs once per tester of ``model_testers.TESTERS`` (char-RNN GRU/LSTM, Bahdanau with
and without attention, Vaswani post-LN/sinusoidal and pre-LN/learned, the RNN classifier).
A family that legitimately lacks a contract says why in its tester's ``lacks`` and the test
is skipped with that reason. The other contracts are in the other
``test_model_contracts_*.py`` modules.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers
from huggingface_hub.errors import StrictDataclassFieldValidationError
from transformers import AutoConfig

from tests.helpers.model_testers import (
    LENGTHS,
    TESTERS,
    VOCAB,
    assert_same_outputs,
    by_tester,
    forward,
    generation_inputs,
    skip_if_lacking,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


# --------------------------------------------------------------------------- configuration


@by_tester
def test_config_round_trips_through_dict_json_and_folder(tester, tmp_path):
    config = tester.config(output_hidden_states=True)
    assert tester.config_class.from_dict(config.to_dict()).to_dict() == config.to_dict()
    config.save_pretrained(tmp_path)
    loaded = AutoConfig.from_pretrained(tmp_path)
    assert type(loaded) is tester.config_class
    assert loaded.to_json_string() == config.to_json_string()
    assert loaded.output_hidden_states is True


@by_tester
def test_config_refuses_bad_values_and_wrong_types_naming_the_field(tester):
    bad, fragment = tester.bad_config
    with pytest.raises(ValueError, match=fragment):
        tester.config(**bad)
    with pytest.raises(StrictDataclassFieldValidationError, match="vocab_size"):
        tester.config(vocab_size="twenty")


# --------------------------------------------------------------------------- save / load


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """``{tester name: (model, folder)}``: each tester's tiny model saved once."""
    folders = {}
    for tester in TESTERS:
        model = tester.model()
        folder = tmp_path_factory.mktemp(tester.name)
        model.save_pretrained(folder)
        folders[tester.name] = (model, folder)
    return folders


@by_tester
def test_save_writes_safetensors_and_load_reports_nothing_missing(tester, saved):
    model, folder = saved[tester.name]
    assert (folder / "model.safetensors").exists()
    assert not list(folder.glob("*.bin")) and not list(folder.glob("*.pt"))
    auto = getattr(transformers, tester.auto_class)
    for loader in (tester.model_class, auto):
        loaded, info = loader.from_pretrained(folder, output_loading_info=True)
        assert type(loaded) is tester.model_class
        assert {k: v for k, v in info.items() if v} == {}, info
        batch = tester.inputs()
        assert_same_outputs(tester, forward(loaded, batch), forward(model, batch), atol=0)


@by_tester
def test_sharded_checkpoint_loads_identically(tester, saved, tmp_path):
    model, _ = saved[tester.name]
    model.save_pretrained(tmp_path, max_shard_size="2KB")
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1
    loaded = tester.model_class.from_pretrained(tmp_path, device_map="cpu")
    assert {p.device.type for p in loaded.parameters()} == {"cpu"}
    batch = tester.inputs()
    assert_same_outputs(tester, forward(loaded, batch), forward(model, batch), atol=0)


def half_tolerance(dtype: torch.dtype) -> float:
    return 0.08 if dtype == torch.bfloat16 else 0.02


@by_tester
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
def test_loading_in_a_dtype_runs_forward_and_generate_in_it(tester, saved, dtype):
    model, folder = saved[tester.name]
    loaded = tester.model_class.from_pretrained(folder, dtype=dtype).eval()
    assert {p.dtype for p in loaded.parameters()} == {dtype}
    assert {b.dtype for b in loaded.buffers() if b.is_floating_point()} <= {dtype}
    batch = tester.inputs()
    out = forward(loaded, batch)
    assert out.logits.dtype == dtype
    reference = forward(model, batch).logits
    tol = half_tolerance(dtype) if dtype != torch.float32 else 1e-6
    torch.testing.assert_close(out.logits.float(), reference, atol=tol, rtol=tol)
    if tester.generates:
        generated = loaded.generate(**generation_inputs(tester), max_new_tokens=3)
        assert generated.shape[0] == len(LENGTHS)


@by_tester
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_forward_makes_every_tensor_on_its_inputs_device(tester, dtype):
    """The model built and run on the meta device (shapes and dtypes, no data): a tensor made
    on a fixed device (the CPU) instead of its inputs' would fail to mix with them here, as it
    would on a GPU; the outputs and the loss keep the device, the dtype and the CPU shapes."""
    skip_if_lacking(tester, "meta_device")
    with torch.device("meta"):
        model = tester.model_class(tester.config()).to(dtype).eval()
    batch = tester.inputs(labels=True)
    reference = forward(tester.model_class(tester.config()).eval(), batch)
    out = forward(model, {k: v.to("meta") for k, v in batch.items()})
    assert (out.logits.device.type, out.logits.dtype) == ("meta", dtype)
    assert out.logits.shape == reference.logits.shape
    assert out.loss.device.type == "meta" and out.loss.shape == reference.loss.shape


@by_tester
def test_a_checkpoint_saved_in_bf16_loads_in_bf16_by_default(tester, saved, tmp_path):
    model, folder = saved[tester.name]
    tester.model_class.from_pretrained(folder, dtype=torch.bfloat16).save_pretrained(tmp_path)
    loaded = tester.model_class.from_pretrained(tmp_path).eval()  # dtype="auto"
    assert {p.dtype for p in loaded.parameters()} == {torch.bfloat16}
    batch = tester.inputs()
    tol = half_tolerance(torch.bfloat16)
    torch.testing.assert_close(
        forward(loaded, batch).logits.float(), forward(model, batch).logits, atol=tol, rtol=tol
    )


@by_tester
def test_tied_weights_stay_tied_after_loading(tester, tmp_path):
    skip_if_lacking(tester, "tied_weights")
    model = tester.model(tie_word_embeddings=True)
    model.save_pretrained(tmp_path)
    loaded = tester.model_class.from_pretrained(tmp_path)
    out_weight = loaded.get_output_embeddings().weight
    in_weight = loaded.get_decoder().embed_tokens.weight if tester.kind == "seq2seq" else None
    in_weight = loaded.get_input_embeddings().weight if in_weight is None else in_weight
    assert out_weight.data_ptr() == in_weight.data_ptr()
    torch.testing.assert_close(out_weight, model.get_output_embeddings().weight)


@by_tester
def test_resize_token_embeddings_keeps_old_rows_and_ties(tester):
    model = tester.model(
        **({} if "tied_weights" in tester.lacks else {"tie_word_embeddings": True})
    )
    old = model.get_input_embeddings().weight.detach().clone()
    model.resize_token_embeddings(VOCAB + 5)
    assert model.config.vocab_size == VOCAB + 5
    new = model.get_input_embeddings().weight
    assert new.shape[0] == VOCAB + 5 and torch.equal(new[:VOCAB], old)
    if "tied_weights" not in tester.lacks:
        assert model.get_output_embeddings().weight.shape[0] == VOCAB + 5
        assert model.get_output_embeddings().weight.data_ptr() == new.data_ptr()
    batch = tester.inputs()
    batch["input_ids"][0, 0] = VOCAB + 4
    out = forward(model, batch)
    if tester.kind != "classification":
        assert out.logits.shape[-1] == VOCAB + 5


# --------------------------------------------------------------------------- attention kernels
@by_tester
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_eager_and_sdpa_agree(tester, saved, dtype):
    skip_if_lacking(tester, "sdpa")
    _, folder = saved[tester.name]
    batch = tester.inputs()
    outputs = {}
    for implementation in ("eager", "sdpa"):
        model = tester.model_class.from_pretrained(
            folder, dtype=dtype, attn_implementation=implementation
        ).eval()
        assert model.config._attn_implementation == implementation
        outputs[implementation] = forward(model, batch).logits.float()
    tol = 1e-5 if dtype == torch.float32 else half_tolerance(dtype)
    torch.testing.assert_close(outputs["sdpa"], outputs["eager"], atol=tol, rtol=tol)


# --------------------------------------------------------------------------- remote code

LOAD_ALL = """
import importlib.util, json, sys, torch, transformers
assert importlib.util.find_spec("hfattn") is None, "hfattn must not be importable here"
results = {}
for name, spec in json.loads(open(sys.argv[1]).read()).items():
    auto = getattr(transformers, spec["auto_class"])
    model = auto.from_pretrained(spec["folder"], trust_remote_code=True).eval()
    batch = {k: torch.tensor(v) for k, v in spec["inputs"].items()}
    with torch.no_grad():
        logits = model(**batch).logits
        sources = {k: v for k, v in batch.items() if k != "decoder_input_ids"}
        generated = None
        if spec["generates"]:
            generated = [model.generate(**sources, max_new_tokens=4, num_beams=beams).tolist()
                         for beams in (1, 3)]
    results[name] = {"module": type(model).__module__, "logits": logits.tolist(),
                     "generated": generated}
print(json.dumps(results))
"""


@pytest.mark.slow
def test_every_family_loads_and_runs_in_a_python_without_hfattn(saved, fresh_python, tmp_path):
    from tests.helpers.fresh_env import run_offline_without_hfattn

    specs, expected = {}, {}
    for tester in TESTERS:
        model, folder = saved[tester.name]
        config = json.loads((Path(folder) / "config.json").read_text())
        assert tester.auto_class in config["auto_map"]
        batch = generation_inputs(tester)
        if tester.kind == "seq2seq":
            batch["decoder_input_ids"] = tester.inputs()["decoder_input_ids"]
        specs[tester.name] = {
            "auto_class": tester.auto_class,
            "folder": str(folder),
            "inputs": {k: v.tolist() for k, v in batch.items()},
            "generates": tester.generates,
        }
        with torch.no_grad():
            logits = model(**batch).logits
            sources = {k: v for k, v in batch.items() if k != "decoder_input_ids"}
            generated = None
            if tester.generates:
                generated = [
                    model.generate(**sources, max_new_tokens=4, num_beams=beams).tolist()
                    for beams in (1, 3)
                ]
        expected[tester.name] = (logits, generated)
    spec_file = tmp_path / "specs.json"
    spec_file.write_text(json.dumps(specs))
    results = run_offline_without_hfattn(fresh_python, LOAD_ALL, str(spec_file), cwd=tmp_path)
    for name, (logits, generated) in expected.items():
        assert results[name]["module"].startswith("transformers_modules"), name
        torch.testing.assert_close(
            torch.tensor(results[name]["logits"]), logits, atol=1e-5, rtol=1e-4
        )
        if generated is not None:
            assert results[name]["generated"] == generated, name
