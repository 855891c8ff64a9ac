"""``docs/hooks/gpu_blocks.py``: the compile paragraph weighs the seconds a compile saves over
the recipe's eager training against its cold compile; the candidates table sets each
candidate beside the shipped recipe's speedrun on the same GPU, from their files."""

import json

import pytest

from docs.hooks import gpu_blocks

MACHINE = {"cpu": "Intel(R) Xeon(R) Processor", "cores": 16, "isa": "AMX", "gpu": "NVIDIA H200"}


def _write(path, record):
    path.write_text(json.dumps({**record, "provenance": {"machine": MACHINE, "command": "cmd"}}))


def _speedrun(wall_s, steps, bleus, final, train_s=200.0, settings=()):
    curve = [{"wall_s": 50.0 * (i + 1), "step": 500 * (i + 1), "bleu": b, "chrf": 40.0}
             for i, b in enumerate(bleus)]  # fmt: skip
    return {"gpu": "NVIDIA H200", "wall_s": wall_s, "steps": steps, "curve": curve, "validation_bleu": final,
            "train_runtime_s": train_s, "settings": list(settings)}  # fmt: skip


def _compiled(ratio, compile_s):
    return {"compile_s": compile_s, "compiles": 2, "compiled_over_eager": ratio,
            "eager": {"tokens_per_s": 100_000.0, "mfu": 0.1},
            "compiled": {"tokens_per_s": 100_000.0 * ratio, "mfu": 0.1 * ratio}}  # fmt: skip


def test_a_compile_that_saves_less_than_it_costs_keeps_the_recipe_eager(tmp_path):
    assert gpu_blocks.compile_block(tmp_path) == gpu_blocks.COMPILE_NONE
    _write(
        tmp_path / "speedrun_vaswani_bible_en_es_base_NVIDIA_H200.json",
        _speedrun(280, 3000, [20.0], 23.0),
    )
    compiled = {"regional": _compiled(1.25, 45.0), "true": _compiled(1.6, 130.0)}
    _write(
        tmp_path / "vaswani_recipe_NVIDIA_H200.json", {"recipe_training": {"compiled": compiled}}
    )
    (tmp_path / "vaswani_recipe_NVIDIA_H200_kernels.txt").write_text("not a record")
    text = gpu_blocks.compile_block(tmp_path)
    # 200 s × (1 − 1/1.25) = 40 s < 45 s; 200 × (1 − 1/1.6) = 75 s < 130 s
    assert "saving 40 s of the recipe's 200 s" in text and "saving 75 s" in text
    assert "`training.compile: auto` keeps the recipe eager" in text
    compiled["regional"] = _compiled(1.5, 45.0)  # saves 67 s > 45 s
    _write(
        tmp_path / "vaswani_recipe_NVIDIA_H200.json", {"recipe_training": {"compiled": compiled}}
    )
    assert "compiled with `regional` the run would end sooner" in gpu_blocks.compile_block(tmp_path)


def test_a_compile_measurement_needs_the_speedrun_of_its_gpu(tmp_path):
    _write(tmp_path / "vaswani_recipe_NVIDIA_H200.json", {"recipe_training": {"compiled": {}}})
    with pytest.raises(FileNotFoundError, match="speedrun_vaswani_bible_en_es_base_NVIDIA_H200"):
        gpu_blocks.compile_block(tmp_path)


def test_the_candidates_stand_beside_the_shipped_recipe_of_their_gpu(tmp_path):
    assert gpu_blocks.candidates_block(tmp_path) == gpu_blocks.CANDIDATES_NONE
    _write(tmp_path / "speedrun_vaswani_bible_en_es_base_NVIDIA_H200.json",
           _speedrun(281.0, 3000, [7.0, 21.6], 23.75))  # fmt: skip
    assert gpu_blocks.candidates_block(tmp_path) == gpu_blocks.CANDIDATES_NONE
    _write(tmp_path / "candidate_vaswani_bible_en_es_base_iwslt_NVIDIA_H200.json",
           _speedrun(286.0, 3000, [5.7, 24.4], 26.49,
                     settings=["model.ffn_dim=1024", "evaluation.splits=[validation]"]))  # fmt: skip
    _write(tmp_path / "candidate_vaswani_bible_en_es_base_iwslt_NVIDIA_H100.json",
           _speedrun(1.0, 1, [1.0], 1.0))  # another GPU's: no shipped run beside it  # fmt: skip
    rows = [
        line for line in gpu_blocks.candidates_block(tmp_path).splitlines() if line.startswith("| ")
    ]
    assert rows[1:] == [
        "| as shipped | 281 s | 3,000 | 7.0 (50 s), 21.6 (100 s) | 23.8 |",
        "| `model.ffn_dim=1024` | 286 s | 3,000 | 5.7 (50 s), 24.4 (100 s) | 26.5 |",
    ]


def test_each_recipe_gets_a_table_of_its_own_candidates(tmp_path):
    for recipe, final in (("vaswani_bible_en_es_base", 23.75),
                          ("bahdanau_bible_en_es_luong_base", 0.2)):  # fmt: skip
        _write(
            tmp_path / f"speedrun_{recipe}_NVIDIA_H200.json", _speedrun(150.0, 823, [0.1], final)
        )
    _write(tmp_path / "candidate_bahdanau_bible_en_es_luong_base_residual_NVIDIA_H200.json",
           _speedrun(155.0, 800, [12.0], 18.0, settings=["model.residual_connections=true"]))  # fmt: skip
    block = gpu_blocks.candidates_block(tmp_path)
    assert block.startswith("`bahdanau_bible_en_es_luong_base` on one NVIDIA H200")
    assert "vaswani" not in block  # no candidate of its own
    assert "| `model.residual_connections=true` | 155 s | 800 | 12.0 (50 s) | 18.0 |" in block
    assert gpu_blocks.block_files(tmp_path) == [
        "candidate_bahdanau_bible_en_es_luong_base_residual_NVIDIA_H200.json"
    ]
