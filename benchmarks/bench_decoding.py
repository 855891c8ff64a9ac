"""Decoding settings of one translation model, scored on the validation books.

    .venv/bin/python -m benchmarks.bench_decoding runs/bahdanau_bible_en_es
        [--num-beams 1 2 4 8] [--length-penalty 1.0 ...] [--mbr] [--split validation]
        [--data bible] [--limit N] [--json PATH]

Every pair of beam size and length penalty translates the same sources with the model's own
``generation_config.json`` otherwise (its ``no_repeat_ngram_size``, for instance), and is
scored with sacrebleu BLEU and chrF against the raw references, as
``benchmarks/bench_translation.py`` scores. Decoding is a choice made on the validation books,
so that is the default split: the test books stay for the final model.

``--mbr`` adds, for every beam size above 1, a row that keeps the beam's best hypothesis
under minimum Bayes risk with chrF as the utility (Kumar & Byrne 2004; Freitag et al. 2022)
instead of the most probable one: of the beam's ``n`` finished hypotheses
:math:`h_1 \\dots h_n`, the one that agrees most with the others,

.. math:: \\hat h = \\arg\\max_{i} \\sum_{j \\ne i} \\mathrm{chrF}(h_i, h_j).

The hypotheses/reference length ratio (sacrebleu's ``sys_len / ref_len``) is reported beside
the scores: chrF weighs recall twice as much as precision (β = 2), so a setting that writes
longer translations can gain chrF while BLEU loses.
"""

from __future__ import annotations

import argparse
import sys
import time

from benchmarks.lib.benchlib import BenchReport, add_json_argument, report_not_run

SOURCE_LANG = "en"
"""The source side of every pair (the Bible's and the generated data sets' English)."""


def mbr_select(candidates: list[str]) -> str:
    r"""The candidate with the highest summed chrF against the other candidates
    (:math:`\arg\max_i \sum_{j \ne i} \mathrm{chrF}(h_i, h_j)`; the first on ties)."""
    import sacrebleu

    if len(candidates) == 1:
        return candidates[0]
    chrf = sacrebleu.CHRF()
    agreement = [
        sum(chrf.sentence_score(h, [o]).score for j, o in enumerate(candidates) if j != i)
        for i, h in enumerate(candidates)
    ]
    return candidates[agreement.index(max(agreement))]


def corpus_scores(predictions: list[str], references: list[str]) -> dict:
    """sacrebleu corpus BLEU, chrF and the hypotheses/reference length ratio."""
    import sacrebleu

    bleu = sacrebleu.corpus_bleu(predictions, [references])
    return {
        "bleu": bleu.score,
        "chrf": sacrebleu.corpus_chrf(predictions, [references]).score,
        "length_ratio": bleu.sys_len / bleu.ref_len,
    }


def decode_grid(model, tokenizer, sources, references, args) -> list[dict]:
    """One row of scores per beam size × length penalty (and per selection with ``--mbr``)."""
    from hfattn.tasks.translation.inference import translate_n_best

    rows = []
    for beams in args.num_beams:
        for penalty in args.length_penalty if beams > 1 else [None]:
            start = time.perf_counter()
            n_best = translate_n_best(
                model,
                tokenizer,
                sources,
                batch_size=args.batch_size,
                num_beams=beams,
                num_return_sequences=beams if args.mbr else 1,
                max_new_tokens=160,
                **({} if penalty is None else {"length_penalty": penalty}),
            )
            seconds = time.perf_counter() - start
            selections = [("most probable", [best[0] for best in n_best])]
            if args.mbr and beams > 1:
                selections.append(("MBR (chrF)", [mbr_select(best) for best in n_best]))
            for selection, predictions in selections:
                row = {"beams": beams, "length_penalty": penalty, "selection": selection}
                rows.append({**row, **corpus_scores(predictions, references), "seconds": seconds})
                print(rows[-1], file=sys.stderr)
    return rows


def markdown_table(rows: list[dict]) -> str:
    lines = [
        "| beams | length penalty | hypothesis kept | BLEU | chrF | length ratio | seconds |",
        "|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        penalty = "—" if r["length_penalty"] is None else f"{r['length_penalty']:g}"
        lines.append(
            f"| {r['beams']} | {penalty} | {r['selection']} | {r['bleu']:.2f} | {r['chrf']:.2f} "
            f"| {r['length_ratio']:.3f} | {r['seconds']:.0f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the markdown table of the decoding grid's scores."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "folder", nargs="?", help="a translation model folder (none: the report says not run)"
    )
    parser.add_argument("--data", default="bible")
    parser.add_argument("--split", default="validation")
    parser.add_argument("--num-beams", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--length-penalty", type=float, nargs="+", default=[1.0])
    parser.add_argument("--mbr", action="store_true", help="add MBR (chrF) rows")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--limit", type=int, help="score only the first N pairs")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    if min(args.num_beams) < 1:
        parser.error(f"--num-beams: every size must be >= 1, got {args.num_beams}")
    if args.folder is None:
        reason = (
            "no model folder given: train one, e.g. `hfattn train recipes/vaswani_bible_en_es.yaml`"
        )
        return report_not_run("decoding", reason, args.json)

    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    import hfattn.models  # noqa: F401  (registers the model types)
    from hfattn.data.translation import load_translation_splits
    from hfattn.tasks.translation.encoding import target_language

    model = AutoModelForSeq2SeqLM.from_pretrained(args.folder)
    tokenizer = AutoTokenizer.from_pretrained(args.folder)
    split = load_translation_splits(args.data)[args.split]
    target_lang = target_language(split, SOURCE_LANG)
    rows = split["translation"][: args.limit]
    sources = [row[SOURCE_LANG] for row in rows]
    references = [row[target_lang] for row in rows]
    scored = decode_grid(model, tokenizer, sources, references, args)

    report = BenchReport("decoding")
    for r in scored:
        name = f"beam {r['beams']}, length penalty {r['length_penalty']}, {r['selection']}"
        report.add(f"{name}: BLEU", r["bleu"], "BLEU", None)
        report.add(f"{name}: chrF", r["chrf"], "chrF", None)
    heading = f"{len(sources)} {args.split} pairs of {args.data}, model `{args.folder}`"
    report.markdown.append(f"{heading}\n\n{markdown_table(scored)}")
    print(report.markdown[-1])
    report.write(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
