"""The CTranslate2 export of the Vaswani Transformer (issue 23): for every config variant the
spec can express, the fp32 export decodes exactly what ``generate`` decodes (greedy and beam
4, token for token) and scores every target token with the model's log-probability; int8
agrees on most sentences; the configs CTranslate2 cannot express are refused in one line
before any slow work; ``hfattn export`` writes the folder atomically; the loader translates
texts as ``translate_texts`` does, with the defaults of ``generation_config.json``.

Models: tiny (2+2 layers, d 32) Vaswani Transformers trained for 200 steps to reverse
sequences of 3-8 letters (distributions peaked as in real use), and the same architectures
with random weights where only exact agreement is asked (beam search then with
``length_penalty=0``: scores then only fall as tokens are added, so ``generate``'s stopping
heuristic and CTranslate2's "stop once the best beam has ended" return the same hypothesis;
with a length penalty they differ where beams run to the length limit, see
:class:`hfattn.export.DecodingSettings`).
"""

from __future__ import annotations

import json
import logging
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import PreTrainedTokenizerFast

from hfattn import BahdanauConfig, VaswaniConfig, VaswaniForConditionalGeneration
from hfattn.batching.seq2seq import pad_pairs, pad_sources
from hfattn.cli import main as cli_main
from hfattn.export import (
    CTranslate2Translation,
    ExportError,
    build_spec,
    check_exportable,
    export_ctranslate2,
)
from hfattn.tasks.translation.inference import translate_texts
from hfattn.tokenization.translation import build_translation_tokenizer

pytest.importorskip(
    "ctranslate2", reason="ctranslate2 is not installed: pip install 'hfattn[serve]'"
)

PAD, UNK, BOS, EOS = 0, 1, 2, 3
LETTERS = "abcdefghijkl"
VOCAB = 4 + len(LETTERS)
BASE = dict(
    vocab_size=VOCAB,
    encoder_layers=2,
    decoder_layers=2,
    d_model=32,
    num_heads=4,
    ffn_dim=64,
    dropout=0.0,
    max_position_embeddings=32,
)
VARIANTS = {
    "post-ln-sinusoidal-relu-tied": {},
    "pre-ln-gelu-untied": {
        "norm_position": "pre",
        "activation": "gelu",
        "share_encoder_decoder_embeddings": False,
        "tie_word_embeddings": False,
    },
    "learned-positions-unscaled": {"position_embedding": "learned", "scale_embedding": False},
    "head-dim-16": {"head_dim": 16},  # 4 heads × 16 ≠ d_model 32
    "dot-no-bias-gelu-tanh": {
        "attention_score": "dot",
        "attention_bias": False,
        "activation": "gelu_new",
    },
}
"""Every option the spec expresses, each in at least one variant: post/pre-LN, sinusoidal /
learned positions, ReLU / GELU (erf and tanh), shared and tied / separate embeddings, with and
without the √d scaling, head_dim ≠ d_model / heads, dot and scaled dot, with and without
biases."""
REFUSED = [
    ({"attention_score": "additive"}, "attention_score='additive'"),
    ({"attention_distribution": "sparsemax"}, "attention_distribution='sparsemax'"),
    ({"activation": "leaky_relu"}, "activation='leaky_relu'"),
    ({"init_method": "t-fixup"}, "init_method='t-fixup'"),
    ({"chollet_cross_attention_mask": True}, "chollet_cross_attention_mask=true"),
]


# ---- data, models, decoding on both sides ------------------------------------------------------
@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerFast:
    """hfattn's word-level translation tokenizer over the letters (``a`` = 4 ... ``l`` = 15),
    every encoding ending with ``<eos>``."""
    words = " ".join(LETTERS)
    built = build_translation_tokenizer(
        [(words, words)], kind="word", vocab_size=VOCAB, model_max_length=32
    )
    assert built.convert_tokens_to_ids(list(LETTERS)) == list(range(4, VOCAB))
    return built


def reversal_pairs(generator: torch.Generator, size: int) -> tuple[list, list]:
    """Sources of 3-8 letters (+ ``<eos>``) and, as targets, each reversed (+ ``<eos>``)."""
    sources, targets = [], []
    for length in torch.randint(3, 9, (size,), generator=generator).tolist():
        letters = torch.randint(4, VOCAB, (length,), generator=generator).tolist()
        sources.append([*letters, EOS])
        targets.append([*letters[::-1], EOS])
    return sources, targets


def make_model(overrides: dict, steps: int = 0, seed: int = 0) -> VaswaniForConditionalGeneration:
    """A tiny Vaswani model in eval mode: trained for ``steps`` Adam steps on reversal, or
    with random weights (biases included) when ``steps`` is 0."""
    torch.manual_seed(seed)
    model = VaswaniForConditionalGeneration(VaswaniConfig(**{**BASE, **overrides}))
    if steps:
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
        generator = torch.Generator().manual_seed(seed)
        for _ in range(steps):
            batch = pad_pairs(*reversal_pairs(generator, 32), PAD)
            loss = model(**batch).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    else:
        with torch.no_grad():
            for name, param in model.named_parameters():
                if "embed" not in name:
                    param.add_(0.3 * torch.randn_like(param))
    return model.eval()


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


def test_loader_refuses_bad_input_in_one_line(tokenizer, tmp_path):
    folder = export_ctranslate2(make_model({}), tokenizer, tmp_path / "ct2")
    cases = [
        (lambda: CTranslate2Translation(folder, compute_type="int4"), "compute_type must be"),
        (lambda: CTranslate2Translation(folder, device="tpu"), "device must be one of"),
        (lambda: CTranslate2Translation(tmp_path), "model.bin is missing"),
        (lambda: CTranslate2Translation(folder).translate(["a"], num_beams=0), "num_beams"),
        (lambda: CTranslate2Translation(folder).translate(["a"], batch_size=0), "batch_size"),
        (lambda: CTranslate2Translation(folder).translate(["a"], patience=0), "patience must"),
        (
            lambda: CTranslate2Translation(folder).translate(["a"], early_stopping="soon"),
            "early_stopping must",
        ),
    ]
    for call, fragment in cases:
        with pytest.raises(ValueError, match=fragment) as info:
            call()
        assert "\n" not in str(info.value)


# ---- refusals ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("overrides", "named"), REFUSED, ids=[n for _, n in REFUSED])
def test_unsupported_configs_are_refused_in_one_line(overrides, named, tokenizer, tmp_path):
    config = VaswaniConfig(**{**BASE, **overrides})
    with pytest.raises(ExportError) as info:
        check_exportable(config)
    message = str(info.value)
    assert "\n" not in message and named in message and "allowed:" in message
    model = VaswaniForConditionalGeneration(config)
    with pytest.raises(ExportError, match=named.replace("(", r"\(")):
        export_ctranslate2(model, tokenizer, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert list(tmp_path.iterdir()) == []  # no temporary folder left either


def test_other_architectures_and_tokenizers_are_refused(tokenizer):
    with pytest.raises(ExportError, match="model_type='bahdanau'"):
        check_exportable(BahdanauConfig(vocab_size=VOCAB))
    with pytest.raises(ExportError, match="model_type='marian'"):
        check_exportable({"model_type": "marian"})
    check_exportable({"model_type": "vaswani"})  # config.json defaults are exportable
    small = make_model({"vocab_size": VOCAB - 2})
    with pytest.raises(ExportError, match="the tokenizer has 16 tokens .* vocab_size is 14"):
        export_ctranslate2(small, tokenizer, "never-written")


# ---- the command ---------------------------------------------------------------------------------
def test_hfattn_export_writes_the_folder_atomically(tokenizer, tmp_path, capsys, monkeypatch):
    model_dir = tmp_path / "run"
    model = make_model({})
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    out = tmp_path / "exports" / "ct2"
    args = ["export", str(model_dir), str(out), "--format", "ctranslate2"]
    assert cli_main([*args, "--quantization", "int8"]) == 0
    assert f"wrote {out} (CTranslate2, int8)" in capsys.readouterr().out
    names = {p.name for p in out.iterdir()}
    assert {"model.bin", "config.json", "shared_vocabulary.json", "tokenizer.json"} <= names
    assert {"generation_config.json", "hfattn_export.json", "README.md"} <= names
    readme = (out / "README.md").read_text()
    assert "ctranslate2.Translator(" in readme and "--quantization int8" in readme
    assert json.loads((out / "shared_vocabulary.json").read_text())[:4] == [
        "<pad>",
        "<unk>",
        "<bos>",
        "<eos>",
    ]
    stamp = (out / "model.bin").stat().st_mtime_ns

    assert cli_main(args) == 2  # OUT is taken
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "already exists and is not empty" in error
    assert (out / "model.bin").stat().st_mtime_ns == stamp

    def fail(*_, **__):
        raise OSError("disk full")

    monkeypatch.setattr(PreTrainedTokenizerFast, "save_pretrained", fail)
    assert cli_main([*args, "--overwrite"]) == 2  # a failed rewrite keeps the old export
    assert "disk full" in capsys.readouterr().err
    assert (out / "model.bin").stat().st_mtime_ns == stamp
    assert sorted(p.name for p in out.parent.iterdir()) == ["ct2"]  # no temporary folder
    monkeypatch.undo()

    assert cli_main([*args, "--overwrite"]) == 0
    assert json.loads((out / "hfattn_export.json").read_text())["quantization"] == "float32"
    assert cli_main(["export", str(model_dir), str(model_dir), "--overwrite"]) == 2
    assert "is (or holds) the model folder" in capsys.readouterr().err


def test_hfattn_export_into_a_read_only_folder_names_that_folder(
    tokenizer, tmp_path, capsys, monkeypatch
):
    """One ``error:`` line naming the user's folder, before the weights are read (it once
    named the temporary ``.ct2.74quhve4.tmp`` after converting them)."""
    from hfattn.storage import file_io

    model_dir = tmp_path / "run"
    make_model({}).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    real = os.access  # root is never refused: answer as a read-only folder does
    monkeypatch.setattr(file_io.os, "access", lambda p, mode: Path(p) != locked and real(p, mode))
    monkeypatch.setattr(VaswaniForConditionalGeneration, "from_pretrained", None)  # not reached
    for out in (locked / "ct2", locked / "exports" / "ct2"):
        assert cli_main(["export", str(model_dir), str(out)]) == 2
        assert capsys.readouterr().err == (
            f"error: output folder {out} cannot be written: {locked} is read-only for this "
            "user; give a folder you can write to\n"
        )
    assert list(locked.iterdir()) == []


def test_hfattn_export_refuses_a_config_before_reading_weights(tmp_path, capsys):
    folder = tmp_path / "tfixup"
    folder.mkdir()
    config = VaswaniConfig(**BASE, init_method="t-fixup")
    config.architectures = ["VaswaniForConditionalGeneration"]
    config.save_pretrained(folder)
    (folder / "model.safetensors").write_bytes(b"not a safetensors file")
    (folder / "tokenizer.json").write_text("{}")
    assert cli_main(["export", str(folder), str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert "init_method='t-fixup'" in error and "safetensors" not in error
    assert not (tmp_path / "out").exists()


def test_hfattn_export_refuses_another_family_before_importing_torch(tmp_path):
    """A local model's ``config.json`` is checked before torch and transformers load."""
    folder = tmp_path / "bahdanau"
    folder.mkdir()
    BahdanauConfig(vocab_size=VOCAB).save_pretrained(folder)
    (folder / "model.safetensors").write_bytes(b"not read")
    (folder / "tokenizer.json").write_text("{}")
    code = (
        "import sys\n"
        "from hfattn.cli import main\n"
        f"status = main(['export', {str(folder)!r}, {str(tmp_path / 'out')!r}])\n"
        "print(status, 'torch' in sys.modules, 'transformers' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["2", "False", "False"], done.stderr
    assert "model_type='bahdanau'" in done.stderr and done.stderr.count("\n") == 1
    assert not (tmp_path / "out").exists()


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


def test_int8_products_avoid_the_saturating_avx2_kernel():
    """``CT2_USE_MKL=1`` on a non-Intel x86 CPU without AVX-512 VNNI, nowhere else."""
    from hfattn.export.ctranslate2_runtime import needs_mkl_int8_gemm

    def cpu(vendor, *flags):
        return f"vendor_id\t: {vendor}\nflags\t\t: fpu sse2 avx {' '.join(flags)}\n"

    assert needs_mkl_int8_gemm(cpu("AuthenticAMD", "avx2"))
    assert not needs_mkl_int8_gemm(cpu("AuthenticAMD", "avx2", "avx512f", "avx512_vnni"))
    assert not needs_mkl_int8_gemm(cpu("GenuineIntel", "avx2"))
    assert not needs_mkl_int8_gemm(cpu("AuthenticAMD"))


# `import hfattn.export`, then hfattn loading ctranslate2, on a CPU whose /proc/cpuinfo reads
# as sys.argv[1]'s text; prints what changed and when.
LOAD_ON_CPU = """
import json, os, pathlib, sys
real_read_text = pathlib.Path.read_text
def read_text(self, *args, **kwargs):
    if str(self) == "/proc/cpuinfo":
        return sys.argv[1]
    return real_read_text(self, *args, **kwargs)
pathlib.Path.read_text = read_text
before = dict(os.environ)
import hfattn.export
changed = sorted(k for k in {*before, *os.environ} if before.get(k) != os.environ.get(k))
imported_early = "ctranslate2" in sys.modules
ctranslate2 = hfattn.export.require_ctranslate2()
print(json.dumps({
    "changed_by_import": changed,
    "imported_early": imported_early,
    "CT2_USE_MKL": os.environ.get("CT2_USE_MKL"),
    "int16": "int16" in ctranslate2.get_supported_compute_types("cpu"),
}))
"""


@pytest.mark.skipif(
    not os.path.isfile("/proc/cpuinfo") or platform.machine() != "x86_64",
    reason="needs an x86-64 Linux CPU",
)
@pytest.mark.parametrize("user_value", [None, "0"])
def test_loading_ctranslate2_chooses_the_int8_product_not_importing_hfattn_export(user_value):
    """On an AMD AVX2 CPU, ``import hfattn.export`` changes no environment variable; hfattn
    loading ``ctranslate2`` sets ``CT2_USE_MKL=1`` before CTranslate2 reads it (MKL's int16
    product is then on offer), unless the user set the variable."""
    env = {k: v for k, v in os.environ.items() if k != "CT2_USE_MKL"}
    if user_value is not None:
        env["CT2_USE_MKL"] = user_value
    amd_avx2 = "vendor_id\t: AuthenticAMD\nflags\t\t: fpu sse2 avx avx2\n"
    done = subprocess.run(
        [sys.executable, "-c", LOAD_ON_CPU, amd_avx2],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["changed_by_import"] == [] and report["imported_early"] is False
    if user_value is None:
        assert report["CT2_USE_MKL"] == "1" and report["int16"] is True
    else:
        assert report["CT2_USE_MKL"] == "0" and report["int16"] is False
