"""The CTranslate2 export of the Vaswani Transformer (issue 23) decodes as the model: for every
config variant the spec can express, the fp32 export decodes exactly what ``generate`` decodes
(greedy and beam 4, token for token) and scores every target token with the model's
log-probability; int8 agrees on most sentences; the loader translates texts as
``translate_texts`` does, with the defaults of ``generation_config.json``, and so does ``hfattn
translate --engine ctranslate2``, from the model folder or from the Hub repo it was pushed to.

Models (``tests/helpers/reversal_models.py``): tiny (2+2 layers, d 32) Vaswani Transformers
trained for 200 steps to reverse sequences of 3-8 letters (distributions peaked as in real
use), and the same architectures with random weights where only exact agreement is asked (beam
search then with ``length_penalty=0``: scores then only fall as tokens are added, so
``generate``'s stopping heuristic and CTranslate2's "stop once the best beam has ended" return
the same hypothesis; with a length penalty they differ where beams run to the length limit, see
:class:`hfattn.export.DecodingSettings`). Refusals and ``hfattn export`` are in
``test_ctranslate2_export_command.py``.
"""

from __future__ import annotations

import json
import logging

import pytest
import torch

from hfattn import VaswaniConfig, VaswaniForConditionalGeneration
from hfattn.batching.seq2seq import pad_pairs, pad_sources
from hfattn.cli import main as cli_main
from hfattn.export import CTranslate2Translation, build_spec, export_ctranslate2
from hfattn.tasks.translation.inference import translate_texts
from tests.helpers.reversal_models import (
    BASE,
    EOS,
    LETTERS,
    PAD,
    VARIANTS,
    make_model,
    reversal_pairs,
)

pytest.importorskip(
    "ctranslate2", reason="ctranslate2 is not installed: pip install 'hfattn[serve]'"
)


# ---- the trained models, decoding on both sides ------------------------------------------------
TRAINED: dict[str, VaswaniForConditionalGeneration] = {}


def trained(variant: str) -> VaswaniForConditionalGeneration:
    """The variant trained for 200 steps (once per test session)."""
    if variant not in TRAINED:
        TRAINED[variant] = make_model(VARIANTS[variant], steps=200)
    return TRAINED[variant]


@torch.no_grad()
def generate_rows(model, sources: list[list[int]], **kwargs) -> list[list[int]]:
    """``generate``'s new tokens per source, up to (without) the first ``<eos>``."""
    out = model.generate(**pad_sources(sources, PAD), do_sample=False, **kwargs)
    rows = [row[1:].tolist() for row in out]
    return [row[: row.index(EOS)] if EOS in row else row for row in rows]


def sample_sources(seed: int = 7, size: int = 24) -> list[list[int]]:
    """``size`` held-out sources (another seed than training's)."""
    return reversal_pairs(torch.Generator().manual_seed(seed), size)[0]


# ---- exactness -----------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_fp32_export_decodes_and_scores_as_the_model(variant, tokenizer, tmp_path):
    model = trained(variant)
    folder = export_ctranslate2(model, tokenizer, tmp_path / "ct2")
    engine = CTranslate2Translation(folder)
    sources = sample_sources()
    for beams, penalty in ((1, 1.0), (4, 0.0)):
        settings = dict(num_beams=beams, max_new_tokens=12, length_penalty=penalty)
        expected = generate_rows(model, sources, **settings)
        assert engine.generate_ids(sources, **settings) == expected, beams
    # With a length penalty and early_stopping=True both stop once num_beams hypotheses have
    # ended (CTranslate2 at patience 1): the same rows, penalty or not.
    for penalty in (1.0, 0.6, 2.0):
        settings = dict(num_beams=4, max_new_tokens=12, length_penalty=penalty)
        assert engine.generate_ids(sources, **settings, early_stopping=True) == generate_rows(
            model, sources, **settings, early_stopping=True
        ), penalty
    # generate's default (early_stopping=False) searches on while a live beam may still win,
    # which CTranslate2 cannot express, so a rare row differs; the rows that agree are most.
    settings = dict(num_beams=4, max_new_tokens=12, length_penalty=1.0)
    ours, theirs = (
        engine.generate_ids(sources, **settings),
        generate_rows(model, sources, **settings),
    )
    agree = sum(a == b for a, b in zip(ours, theirs, strict=True))
    assert agree >= 0.9 * len(sources), agree
    # Then patience 2 (the default that follows early_stopping=False) waits for more ended
    # hypotheses than CTranslate2's own 1, nearer generate's rule: at least as many agree.
    hasty = engine.generate_ids(sources, **settings, patience=1.0)
    assert engine.defaults.beam_patience == 2.0
    assert sum(a == b for a, b in zip(hasty, theirs, strict=True)) <= agree
    # Every target token scored with the model's teacher-forced log-probability.
    targets = reversal_pairs(torch.Generator().manual_seed(7), 24)[1]
    convert = tokenizer.convert_ids_to_tokens
    scored = engine.translator.score_batch(
        [convert(s) for s in sources], [convert(t[:-1]) for t in targets]
    )
    with torch.no_grad():
        logits = model(**pad_pairs(sources, targets, PAD)).logits.log_softmax(-1)
    for row, (result, target) in enumerate(zip(scored, targets, strict=True)):
        expected = logits[row, torch.arange(len(target)), torch.tensor(target)]
        assert torch.allclose(torch.tensor(result.log_probs), expected, atol=1e-4), variant


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_random_weights_greedy_and_beam_are_exact(variant, tokenizer, tmp_path):
    model = make_model(VARIANTS[variant], seed=1)
    engine = CTranslate2Translation(export_ctranslate2(model, tokenizer, tmp_path / "ct2"))
    sources = sample_sources(seed=3)
    for beams in (1, 4):
        settings = dict(num_beams=beams, max_new_tokens=10, length_penalty=0.0)
        assert engine.generate_ids(sources, **settings) == generate_rows(
            model, sources, **settings
        ), beams


def test_an_all_zero_output_bias_is_left_out(tokenizer, tmp_path):
    """A freshly initialised model (zero biases): no output bias in the spec, same tokens."""
    torch.manual_seed(3)
    model = VaswaniForConditionalGeneration(VaswaniConfig(**BASE)).eval()
    assert not model.lm_head.bias.any()
    assert not build_spec(model, tokenizer).decoder.projection.has_bias()
    engine = CTranslate2Translation(export_ctranslate2(model, tokenizer, tmp_path / "ct2"))
    sources = sample_sources(seed=6, size=8)
    assert engine.generate_ids(sources, max_new_tokens=10) == generate_rows(
        model, sources, max_new_tokens=10
    )


def test_sinusoids_extend_beyond_max_position_embeddings(tokenizer, tmp_path):
    """hfattn computes sinusoids for any position; the export writes 1024 of them."""
    model = make_model({"max_position_embeddings": 8}, seed=2)
    engine = CTranslate2Translation(export_ctranslate2(model, tokenizer, tmp_path / "ct2"))
    sources = [s[:7] + [EOS] for s in sample_sources(seed=4, size=6)]
    settings = dict(num_beams=1, max_new_tokens=40, min_new_tokens=40)
    generated = engine.generate_ids(sources, **settings)
    assert [len(row) for row in generated] == [40] * 6
    assert generated == generate_rows(model, sources, **settings)


def test_learned_positions_bound_the_new_tokens(tokenizer, tmp_path, caplog):
    model = make_model({"position_embedding": "learned", "max_position_embeddings": 8}, seed=2)
    engine = CTranslate2Translation(export_ctranslate2(model, tokenizer, tmp_path / "ct2"))
    with caplog.at_level(logging.WARNING, logger="hfattn.export.serving"):
        generated = engine.generate_ids([[4, 5, EOS]], max_new_tokens=20, min_new_tokens=20)
    assert len(generated[0]) == 8
    assert "max_new_tokens 20 is more than the decoder's 8 positions" in caplog.text


# ---- quantization --------------------------------------------------------------------------------
def test_quantized_exports_agree_on_most_and_leave_the_model_untouched(tokenizer, tmp_path):
    model = trained("post-ln-sinusoidal-relu-tied")
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    sources = sample_sources(seed=11, size=64)
    reference = generate_rows(model, sources, num_beams=1, max_new_tokens=12)
    sizes = {}
    for quantization in ("int8", "int8_float32", "float16", "int8_float16"):
        folder = export_ctranslate2(
            model, tokenizer, tmp_path / quantization, quantization=quantization
        )
        sizes[quantization] = (folder / "model.bin").stat().st_size
        info = json.loads((folder / "hfattn_export.json").read_text())
        assert info["quantization"] == quantization
        engine = CTranslate2Translation(folder)  # float16 parts run as float32 on a CPU
        rows = engine.generate_ids(sources, num_beams=1, max_new_tokens=12)
        same = sum(a == b for a, b in zip(rows, reference, strict=True)) / len(sources)
        assert same >= (0.95 if quantization == "float16" else 0.75), (quantization, same)
    fp32 = export_ctranslate2(model, tokenizer, tmp_path / "fp32")
    assert sizes["int8"] < 0.75 * (fp32 / "model.bin").stat().st_size
    assert sizes["int8_float16"] < sizes["int8"]
    for name, tensor in model.state_dict().items():  # quantizing scales copies, not the model
        assert torch.equal(tensor, before[name]), name


# ---- the loader ----------------------------------------------------------------------------------
def test_translate_follows_translate_texts_and_generation_config(tokenizer, tmp_path, caplog):
    model = trained("post-ln-sinusoidal-relu-tied")
    model.generation_config.num_beams = 3
    model.generation_config.max_new_tokens = 6
    model.generation_config.length_penalty = 0.5
    model.generation_config.early_stopping = True
    try:
        engine = CTranslate2Translation(export_ctranslate2(model, tokenizer, tmp_path / "ct2"))
    finally:
        model.generation_config.num_beams = 1
        model.generation_config.max_new_tokens = None
        model.generation_config.length_penalty = 1.0
        model.generation_config.early_stopping = False
    assert (engine.defaults.num_beams, engine.defaults.max_new_tokens) == (3, 6)
    assert engine.defaults.length_penalty == 0.5
    assert (engine.defaults.early_stopping, engine.defaults.beam_patience) == (True, 1.0)
    letters = [" ".join(LETTERS[t - 4] for t in s[:-1]) for s in sample_sources(seed=5, size=12)]
    texts = [*letters, "", "   ", "a b c d e f g h i j k l " * 3, "a z b"]  # blank, too long, <unk>
    with caplog.at_level(logging.WARNING):
        got = engine.translate(texts)
    expected = translate_texts(
        model,
        tokenizer,
        texts,
        num_beams=3,
        max_new_tokens=6,
        length_penalty=0.5,
        early_stopping=True,
    )
    assert got == expected
    assert got[len(letters)] == got[len(letters) + 1] == ""
    assert "source(s) longer than 32 tokens were truncated" in caplog.text
    assert engine.translate(texts, num_beams=1, max_new_tokens=12) == translate_texts(
        model, tokenizer, texts, num_beams=1, max_new_tokens=12
    )


# ---- serving: hfattn translate --engine ctranslate2, the export pushed beside the model ----------
def _run_with_export(tokenizer, tmp_path):
    """A saved model folder (the trained reversal model) with its export in ``ct2/``."""
    run = tmp_path / "run"
    trained("post-ln-sinusoidal-relu-tied").save_pretrained(run)
    tokenizer.save_pretrained(run)
    assert cli_main(["export", str(run), str(run / "ct2"), "--format", "ctranslate2"]) == 0
    return run


def test_translate_with_the_ctranslate2_engine_matches_generate(tokenizer, tmp_path, capsys):
    run = _run_with_export(tokenizer, tmp_path)
    capsys.readouterr()
    texts = [" ".join(LETTERS[t - 4] for t in s[:-1]) for s in sample_sources(seed=3, size=8)]
    for beams in ("1", "4"):
        outputs = {}
        for engine, folder in (("torch", run), ("ctranslate2", run), ("ctranslate2", run / "ct2")):
            args = ["translate", str(folder), *texts, "--num-beams", beams, "--engine", engine]
            assert cli_main(args) == 0
            outputs[(engine, folder)] = capsys.readouterr().out
        assert len(set(outputs.values())) == 1, outputs
        assert len(outputs[("torch", run)].splitlines()) == len(texts)

    (tmp_path / "bare").mkdir()
    assert cli_main(["translate", str(tmp_path / "bare"), "a b", "--engine", "ctranslate2"]) == 2
    error = capsys.readouterr().err
    assert "has no CTranslate2 export" in error and "hfattn export" in error
    assert cli_main(["translate", "./nope", "a b", "--engine", "ctranslate2"]) == 2
    assert "model folder not found: ./nope" in capsys.readouterr().err


def test_push_uploads_the_export_and_the_card_says_how_to_use_it(
    tokenizer, tmp_path, capsys, hub_server
):
    run = _run_with_export(tokenizer, tmp_path)
    (run / "checkpoints").mkdir()  # still left out
    args = ["push", str(run), "--repo-id", "tester/rev", "--license", "mit"]
    assert cli_main(args) == 0
    files = set(hub_server.files("tester/rev"))
    assert {"ct2/model.bin", "ct2/hfattn_export.json", "ct2/tokenizer.json"} <= files
    assert "model.safetensors" in files and not any(f.startswith("checkpoints") for f in files)
    card = (hub_server.revision_dir("tester/rev") / "README.md").read_text()
    assert "### Fast inference with CTranslate2" in card
    assert "hfattn translate tester/rev --engine ctranslate2" in card

    # the Hub repo's export serves `hfattn translate REPO --engine ctranslate2`
    capsys.readouterr()
    assert cli_main(["translate", "tester/rev", "a b c", "--engine", "ctranslate2"]) == 0
    from_hub = capsys.readouterr().out
    assert cli_main(["translate", str(run), "a b c"]) == 0
    assert from_hub == capsys.readouterr().out

    plain = tmp_path / "plain"
    trained("post-ln-sinusoidal-relu-tied").save_pretrained(plain)
    tokenizer.save_pretrained(plain)
    assert cli_main(["push", str(plain), "--repo-id", "tester/plain", "--license", "mit"]) == 0
    card = (hub_server.revision_dir("tester/plain") / "README.md").read_text()
    assert "CTranslate2" not in card
    assert not any(f.startswith("ct2/") for f in hub_server.files("tester/plain"))
