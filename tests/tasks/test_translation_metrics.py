"""The translation task's metrics and references: the bundled metrics equal sacrebleu's and
share one scratch folder per user, references follow the tokenizer's normalisation, sources
longer than the model are cut with a warning or refused (the teacher-forced scores of a trained
run are checked in ``test_translation_end_to_end.py``)."""

from __future__ import annotations

import logging
import os
import tempfile

import pytest
import sacrebleu

from hfattn.evaluation import load_metric
from hfattn.tasks.translation.encoding import SourceTooLongError, encode_sources, reference_text
from hfattn.tokenization.translation import build_translation_tokenizer


def test_bundled_metrics_equal_sacrebleu():
    hyps = ["el gato se sentó en la alfombra", "hola", "22 de abril de 2019"]
    refs = ["el gato se sentó sobre la alfombra", "hola", "22 de abril del 2019"]
    bleu = load_metric("sacrebleu").compute(predictions=hyps, references=refs)["score"]
    chrf = load_metric("chrf").compute(predictions=hyps, references=refs)["score"]
    assert bleu == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)
    assert chrf == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score)
    em = load_metric("exact_match").compute(predictions=hyps, references=refs)
    assert em["exact_match"] == pytest.approx(1 / 3)


def test_reference_text_follows_the_tokenizer_normalisation():
    pairs = [{"en": "How are you, Tom?", "es": "¿Cómo estás, Tom?"}] * 3
    word = build_translation_tokenizer(pairs, kind="word", vocab_size=50)
    # lowercased, punctuation gone, words spaced as decode writes them; unknown words kept
    assert reference_text(word, "¿Cómo estás, Ana?") == "cómo estás ana"
    ids = word(text_target="¿Cómo estás, Tom?")["input_ids"]
    assert word.decode(ids, skip_special_tokens=True) == reference_text(word, "¿Cómo estás, Tom?")
    char = build_translation_tokenizer(pairs, kind="char")
    assert reference_text(char, "¿Cómo  estás?") == "¿Cómo estás?"


def test_sources_longer_than_the_model_are_cut_with_a_warning_or_refused(caplog):
    pairs = [{"en": "abc def", "es": "abc def"}]
    tok = build_translation_tokenizer(pairs, kind="char")
    with caplog.at_level(logging.WARNING):
        ids = encode_sources(tok, ["abc", "abcdefabcdef"], limit=6)
    assert ids[0] == tok("abc")["input_ids"] and len(ids[1]) == 6
    assert ids[1][-1] == tok.eos_token_id
    assert "1 source(s) longer than 6 tokens were truncated" in caplog.text
    with pytest.raises(
        SourceTooLongError, match="source 1 has 13 tokens; the model accepts at most 6"
    ):
        encode_sources(tok, ["abc", "abcdefabcdef"], limit=6, on_too_long="error")


def test_the_metrics_share_one_scratch_folder_per_user(tmp_path, monkeypatch):
    """Each metric gets an empty folder in one scratch folder per user, under the temporary
    folder, which outlives the process: a process killed before its clean-up (SIGKILL) leaves
    no folder of its own behind."""
    from hfattn import evaluation

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    evaluation._scratch_dir.cache_clear()
    try:
        assert evaluation.load_metric("sacrebleu").compute(
            predictions=["a b c d"], references=["a b c d"]
        )["score"] == pytest.approx(100.0)
        evaluation._scratch_dir.cache_clear()  # a second process finds the same folder
        evaluation.load_metric("chrf")
    finally:
        evaluation._scratch_dir.cache_clear()
    (scratch,) = tmp_path.glob("hfattn-metrics-*")
    assert scratch.name == f"hfattn-metrics-{os.getuid()}"
    assert len(list(scratch.iterdir())) == 2  # one folder a metric
    assert [path for path in scratch.rglob("*") if not path.is_dir()] == []
