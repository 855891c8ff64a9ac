"""``benchmarks/bench_decoding.py``: the decoding grid scores what ``translate_texts`` writes,
and its MBR row keeps the hypothesis that agrees most with the others."""

from __future__ import annotations

import json

import pytest

from benchmarks import bench_decoding


def test_mbr_keeps_the_consensus_hypothesis_not_the_most_probable():
    assert bench_decoding.mbr_select(["green pear", "red apple", "red apple"]) == "red apple"
    # chrF weighs recall twice as much as precision: the longer of two near-copies is kept
    assert bench_decoding.mbr_select(["green pear", "red apple", "red apple."]) == "red apple."
    assert bench_decoding.mbr_select(["only one"]) == "only one"


@pytest.mark.slow
def test_the_grid_scores_the_translations_of_each_setting(tmp_path, capsys):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from hfattn.data.translation import load_translation_splits
    from hfattn.tasks.translation.inference import translate_n_best, translate_texts
    from tests.helpers.tiny_runs import build_translation_run

    run = build_translation_run(tmp_path / "run", steps=20, training={"eval_every": None})
    out = tmp_path / "grid.json"
    args = [str(run), "--data", "date-normalization", "--limit", "16", "--num-beams", "1", "3"]
    assert bench_decoding.main([*args, "--mbr", "--json", str(out)]) == 0
    table = capsys.readouterr().out
    assert table.count("| 3 | 1 |") == 2 and table.count("| 1 | — | most probable |") == 1
    records = {r["name"]: r["value"] for r in json.loads(out.read_text())["records"]}
    assert len(records) == 6  # greedy, beam 3, beam 3 MBR: BLEU and chrF each

    model = AutoModelForSeq2SeqLM.from_pretrained(run)
    tokenizer = AutoTokenizer.from_pretrained(run)
    pairs = load_translation_splits("date-normalization")["validation"]["translation"][:16]
    sources, references = [p["en"] for p in pairs], [p["iso"] for p in pairs]
    for beams, label in ((1, "beam 1, length penalty None"), (3, "beam 3, length penalty 1.0")):
        written = translate_texts(model, tokenizer, sources, num_beams=beams, max_new_tokens=160)
        expected = bench_decoding.corpus_scores(written, references)
        assert records[f"{label}, most probable: BLEU"] == pytest.approx(expected["bleu"])
        assert records[f"{label}, most probable: chrF"] == pytest.approx(expected["chrf"])
    n_best = translate_n_best(
        model, tokenizer, sources, num_beams=3, num_return_sequences=3, max_new_tokens=160
    )
    assert all(len(best) == 3 for best in n_best)
    kept = [bench_decoding.mbr_select(best) for best in n_best]
    expected = bench_decoding.corpus_scores(kept, references)
    assert records["beam 3, length penalty 1.0, MBR (chrF): chrF"] == pytest.approx(
        expected["chrf"]
    )


def test_without_a_model_folder_the_report_says_not_run(tmp_path, capsys):
    """``make bench`` runs the script on the first trained Bible run, and with none at all."""
    out = tmp_path / "decoding.json"
    assert bench_decoding.main(["--num-beams", "1", "4", "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["benchmark"] == "decoding" and report["records"] == []
    assert report["not_run"].startswith("no model folder given")
    assert "provenance" in report
    assert "not run: no model folder given" in capsys.readouterr().out
