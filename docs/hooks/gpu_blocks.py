"""The GPU blocks of ``docs/training.md`` that compare settings of the Transformer GPU recipe,
rendered from ``benchmarks/results/`` (registered in :data:`results_tables.BLOCKS`):

- ``compile``: the recipe's step compiled against eager (``vaswani_recipe_<gpu>.json``, from
  ``bench_vaswani.py --recipe``) and what each compile would save over the recipe's eager
  training time (its speedrun's ``train_runtime_s``), which is why ``training.compile: auto``
  keeps the recipe eager or would not;
- ``candidates``: the shipped recipe and each candidate setting
  (``candidate_<recipe>_<name>_<gpu>.json``, from ``benchmarks/speedrun.py --name``) on the
  validation books only, against the wall seconds.

Standard library only, as :mod:`docs.hooks.results_tables`.
"""

from __future__ import annotations

import json
from pathlib import Path

from hfattn.common.machine import machine_words

RECIPE = "vaswani_bible_en_es_base"
"""The GPU recipe whose compiled step the compile block weighs."""
CANDIDATE_RECIPES = (RECIPE, "bahdanau_bible_en_es_luong_base")
"""The GPU recipes whose candidate settings the candidates block compares."""

COMPILE_NONE = (
    "The recipe's compiled step has no GPU measurement in this release (`bash "
    "benchmarks/gpu_check.sh` measures it)."
)
CANDIDATES_NONE = "No candidate setting of the GPU recipe is measured in this release."


def block_files(root: Path) -> list[str]:
    """The names of the files of ``root`` that these blocks read (the speedruns beside them
    are :func:`results_tables.speedrun_files`)."""
    recipe_steps = [p for p in root.glob("vaswani_recipe_*.json") if "_kernels" not in p.name]
    candidates = [p for r in CANDIDATE_RECIPES for p in root.glob(f"candidate_{r}_*.json")]
    return sorted(p.name for p in [*recipe_steps, *candidates])


def _read(path: Path) -> dict:
    return json.loads(path.read_text("utf-8"))


def _device(path: Path, stem: str) -> str:
    """The device tag of a results file named ``<stem>_<device>.json``."""
    return path.stem.removeprefix(f"{stem}_")


def compile_saving(train_s: float, ratio: float) -> float:
    """The seconds a compiled step ``ratio`` times as fast as eager saves over ``train_s`` of
    eager training: ``t · (1 − 1/r)``."""
    return train_s * (1 - 1 / ratio)


def compile_block(root: Path) -> str:
    """One paragraph a GPU: each ``training.compile`` setting's steady speed against eager on
    the recipe's batches, its cold compile, and the seconds it would save over the recipe's
    eager training, against the compile it costs."""
    paragraphs = []
    for path in sorted(root / name for name in block_files(root)):
        if not path.name.startswith("vaswani_recipe_"):
            continue
        record = _read(path)
        speedrun = root / f"speedrun_{RECIPE}_{_device(path, 'vaswani_recipe')}.json"
        if not speedrun.is_file():
            raise FileNotFoundError(f"{path.name}: no {speedrun.name} beside it")
        train_s = _read(speedrun)["train_runtime_s"]
        settings, faster = [], []
        for name, result in record["recipe_training"]["compiled"].items():
            ratio = result["compiled_over_eager"]
            saving = compile_saving(train_s, ratio)
            settings.append(
                f"`{name}` {result['compiled']['tokens_per_s']:,.0f} target tokens/s against "
                f"{result['eager']['tokens_per_s']:,.0f} eager ({ratio:.2f}×, MFU "
                f"{result['compiled']['mfu']:.1%}), cold compile {result['compile_s']:.1f} s "
                f"({result['compiles']} graph(s) for 8 bucket shapes), saving {saving:.0f} s "
                f"of the recipe's {train_s:.0f} s of eager training"
            )
            if saving > result["compile_s"]:
                faster.append(f"`{name}`")
        verdict = (
            f"compiled with {' or '.join(faster)} the run would end sooner"
            if faster
            else "no compile pays for itself within the run, so `training.compile: auto` "
            "keeps the recipe eager"
        )
        paragraphs.append(
            f"On one {machine_words(record['provenance']['machine'])} "
            f"(`{record['provenance']['command']}`, the GPU to itself), the recipe's step "
            f"compiled against eager, round by round on the same batches: "
            f"{'; '.join(settings)}: {verdict}."
        )
    return "\n\n".join(paragraphs) or COMPILE_NONE


def _curve(record: dict) -> str:
    return ", ".join(f"{p['bleu']:.1f} ({p['wall_s']:.0f} s)" for p in record["curve"])


def _row(label: str, record: dict) -> str:
    return (
        f"| {label} | {record['wall_s']:.0f} s | {record['steps']:,} | {_curve(record)} "
        f"| {record['validation_bleu']:.1f} |"
    )


def candidates_block(root: Path) -> str:
    """A table a recipe and GPU: the shipped recipe's speedrun and each candidate's, on the
    validation books (greedy at each periodic evaluation, beam 4 for the saved model)."""
    tables = []
    for recipe in CANDIDATE_RECIPES:
        for shipped in sorted(root.glob(f"speedrun_{recipe}_*.json")):
            device = _device(shipped, f"speedrun_{recipe}")
            candidates = sorted(root.glob(f"candidate_{recipe}_*_{device}.json"))
            if candidates:
                tables.append(_candidates_table(recipe, _read(shipped), candidates))
    return "\n\n".join(tables) or CANDIDATES_NONE


def _candidates_table(recipe: str, shipped: dict, candidates: list[Path]) -> str:
    lines = [
        f"`{recipe}` on one {shipped['gpu']}, the GPU to itself "
        f"(`python -m benchmarks.speedrun recipes/{recipe}.yaml [--set KEY=VALUE ...]`):",
        "",
        "| settings | saved model after | steps | greedy validation BLEU (wall s) "
        "| validation BLEU, beam 4 |",
        "|---|---|---|---|---|",
        _row("as shipped", shipped),
    ]
    for path in candidates:
        candidate = _read(path)
        settings = [s for s in candidate["settings"] if not s.startswith("evaluation.")]
        lines.append(_row(" ".join(f"`{s}`" for s in settings), candidate))
    return "\n".join(lines)
