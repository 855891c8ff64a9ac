"""``benchmarks/bench_translation.py``: the perturbed sources of its robustness row, and the
row itself on the rule-based baseline (Apertium, where ``make sword`` installed it)."""

from __future__ import annotations

import json
import random
import shutil

import pytest

from benchmarks.bench_translation import NOT_WORD, main, perturb, perturbed_sources


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance, with a swap of two neighbours counting once (Damerau)."""
    rows = [
        [max(i, j) if min(i, j) == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)
    ]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            rows[i][j] = min(
                rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + (a[i - 1] != b[j - 1])
            )
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                rows[i][j] = min(rows[i][j], rows[i - 2][j - 2] + 1)
    return rows[-1][-1]


SENTENCES = [
    "In the beginning, God created the heavens and the earth.",
    "Jesus wept.",
    "Love is patient and is kind; love doesn't envy.",
    "“Who are you?” he asked (again).",
]


def test_a_perturbed_sentence_is_lower_case_without_punctuation_and_one_typo_away():
    for seed in range(40):
        for text in SENTENCES:
            noisy = perturb(text, random.Random(seed))
            plain = " ".join(NOT_WORD.sub(" ", text.lower()).split())
            assert noisy == noisy.lower() and not NOT_WORD.search(noisy)
            assert edit_distance(plain, noisy) == 1, (text, noisy)
            assert len(noisy.split()) == len(plain.split())
    assert perturb("Go! Up, up.", random.Random(0)) == "go up up"  # no word of 3 letters


def test_perturbed_sources_are_seeded_per_sentence():
    first = perturbed_sources(SENTENCES)
    assert first == perturbed_sources(SENTENCES)
    assert perturbed_sources(SENTENCES[:2]) == first[:2]
    assert perturbed_sources(SENTENCES, seed=1) != first


@pytest.mark.skipif(shutil.which("apertium") is None, reason="make sword installs apertium-eng-spa")
def test_the_robustness_row_scores_apertium_on_both_source_sets(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert main(["--data", "dates", "--limit", "40", "--perturb", "--json", str(out)]) == 0
    records = {r["name"]: r["value"] for r in json.loads(out.read_text())["records"]}
    clean = records["Apertium eng-spa (rule-based): BLEU"]
    noisy = records["Apertium eng-spa (rule-based): BLEU, perturbed sources"]
    drop = records["Apertium eng-spa (rule-based): BLEU drop, perturbed sources"]
    assert drop == pytest.approx(clean - noisy)
    assert noisy < clean  # lower case and typos cost a rule-based system words
    assert "| Apertium eng-spa (rule-based) |" in capsys.readouterr().out.split("perturbed")[-1]
