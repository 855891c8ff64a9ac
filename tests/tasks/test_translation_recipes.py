"""The translation task's recipes: the fields are checked, the beam search settings go into the
generation config (and bind decoding), every shipped recipe validates, and each Spanish-English
recipe trains on a local ``spa.txt``."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

from hfattn.orchestration.run import run_recipe
from hfattn.recipes import RecipeError, load_recipe
from hfattn.tasks import TASK_NAMES
from tests.helpers.recipe_helpers import write_recipe


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("task=summarize", f"task: 'summarize' is not one of {', '.join(TASK_NAMES)}"),
        (
            "tokenizer.type=sentencepiece",
            "tokenizer.type: 'sentencepiece' is not one of word, char, bpe, unigram",
        ),
        ("data.on_too_long=maybe", "data.on_too_long: 'maybe' is not one of warn, error"),
        ("data.preprocessing=keras", "data.preprocessing: 'keras' is not one of chollet, geron"),
        ("evaluation.seq_len=5", "evaluation.seq_len: not a field of evaluation ("),
        ("training.mode=stateful", "training.mode: not a field of training ("),
        ("model.score=foo", "model.score must be one of dot, scaled_dot, general"),
        ("model.distribution=softermax", "model.distribution must be one of softmax, sparsemax"),
        ("model.cell=rnn", "model.cell must be one of gru, lstm; got 'rnn'"),
        ("model.attention=global", "model.attention must be one of None, bahdanau, luong"),
        (
            "generation.early_stopping=sometimes",
            """generation.early_stopping: 'sometimes' is not one of true, false, "never\"""",
        ),
        (
            "generation.no_repeat_ngram_size=-1",
            "generation.no_repeat_ngram_size: must be an integer >= 0 (0: off), got -1",
        ),
        ("training.max_tokens=0", "training.max_tokens: must be > 0, got 0"),
        (
            "training.group_by_length=both",
            "training.group_by_length: 'both' is not one of source, target",
        ),
        (
            "training.max_tokens=100",
            "training.max_tokens: must be at least data.max_source_length + "
            "data.max_target_length (256) so that the longest pair fits in a batch, got 100",
        ),
    ],
)
def test_translation_recipe_fields_are_checked(tmp_path, override, message):
    model_type = "bahdanau" if override.startswith("model.") else "marian"
    recipe = write_recipe(tmp_path, base={"task": "translation", "model": {"type": model_type}})
    with pytest.raises(RecipeError) as err:
        load_recipe(recipe, [override])
    assert message in str(err.value)


def test_unigram_tokenizer_refuses_a_minimum_count(tmp_path):
    recipe = write_recipe(tmp_path, base={"task": "translation", "model": {"type": "bahdanau"}})
    with pytest.raises(RecipeError) as err:
        load_recipe(recipe, ["tokenizer.type=unigram", "tokenizer.min_frequency=2"])
    assert str(err.value) == (
        "tokenizer.min_frequency: 2 with type unigram: a unigram model keeps pieces by "
        "likelihood, not count; leave it at 1"
    )


def test_beam_stopping_rule_and_length_penalty_go_into_the_generation_config(tmp_path):
    """``generation.early_stopping`` / ``length_penalty`` are saved for beam search, in a
    ``GenerationConfig`` that transformers accepts, and left out for greedy search (where
    transformers refuses to save them)."""
    from transformers import GenerationConfig

    from hfattn.tasks.translation.task import TASK

    recipe = write_recipe(tmp_path, base={"task": "translation", "model": {"type": "marian"}})
    beams = load_recipe(recipe, ["generation.early_stopping=true", "generation.length_penalty=0.6"])
    defaults = TASK.generation_defaults(beams)
    assert (defaults["num_beams"], defaults["early_stopping"], defaults["length_penalty"]) == (
        4,
        True,
        0.6,
    )
    GenerationConfig(**defaults).save_pretrained(tmp_path / "beams")  # validates strictly
    never = TASK.generation_defaults(load_recipe(recipe, ["generation.early_stopping=never"]))
    assert never["early_stopping"] == "never"
    greedy = TASK.generation_defaults(load_recipe(recipe, ["generation.num_beams=1"]))
    assert "early_stopping" not in greedy and "length_penalty" not in greedy
    GenerationConfig(**greedy).save_pretrained(tmp_path / "greedy")
    with pytest.raises(RecipeError, match=r"^generation.early_stopping: True is not used"):
        load_recipe(recipe, ["generation.num_beams=1", "generation.early_stopping=true"])
    assert load_recipe("recipes/vaswani_bible_en_es.yaml").generation.early_stopping is True


def test_no_repeat_ngram_size_goes_into_the_generation_config_and_binds_decoding(tmp_path):
    """``generation.no_repeat_ngram_size`` is saved (greedy and beam) only when set, and a
    model decoding with it never repeats an n-gram of that size."""
    from transformers import GenerationConfig

    from hfattn.models import BahdanauConfig, BahdanauForConditionalGeneration
    from hfattn.tasks.translation.task import TASK

    recipe = write_recipe(tmp_path, base={"task": "translation", "model": {"type": "marian"}})
    assert "no_repeat_ngram_size" not in TASK.generation_defaults(load_recipe(recipe))
    for beams in (1, 4):
        overrides = [f"generation.num_beams={beams}", "generation.no_repeat_ngram_size=2"]
        defaults = TASK.generation_defaults(load_recipe(recipe, overrides))
        assert defaults["no_repeat_ngram_size"] == 2
        GenerationConfig(**defaults).save_pretrained(tmp_path / f"beams{beams}")
    torch.manual_seed(0)
    config = BahdanauConfig(vocab_size=12, embedding_dim=8, encoder_hidden_size=8,
                            decoder_hidden_size=16, pad_token_id=0, bos_token_id=1,
                            eos_token_id=2, decoder_start_token_id=1)  # fmt: skip
    model = BahdanauForConditionalGeneration(config).eval()
    ids = torch.tensor([[5, 6, 7, 8, 2]])
    plain = model.generate(input_ids=ids, max_new_tokens=20, min_new_tokens=20)[0].tolist()
    bound = model.generate(input_ids=ids, max_new_tokens=20, min_new_tokens=20,
                           no_repeat_ngram_size=2)[0].tolist()  # fmt: skip
    pairs = list(zip(bound, bound[1:], strict=False))
    assert len(set(pairs)) == len(pairs)
    assert len(set(zip(plain, plain[1:], strict=False))) < len(plain) - 1  # untrained: loops


@pytest.mark.parametrize(
    "path",
    sorted((Path(__file__).resolve().parents[2] / "recipes").glob("*.yaml")),
    ids=lambda p: p.stem,
)
def test_shipped_recipes_validate(path):
    recipe = load_recipe(path)
    assert recipe.name == path.stem


SPA_RECIPES = {
    "bahdanau_spa_eng": (
        ["model.embedding_dim=8", "model.encoder_hidden_size=16", "model.decoder_hidden_size=32",
         "data.train_size=200"],
        {"cell": "lstm", "encoder_hidden_size": 16, "bridge": "concat", "attention": "bahdanau"},
        20,  # Géron's split: 200 train pairs, the other 40 halved
    ),
    "vaswani_spa_eng_geron": (
        ["model.d_model=16", "model.head_dim=8", "model.ffn_dim=16", "data.train_size=200"],
        {"encoder_layers": 2, "decoder_layers": 2, "num_heads": 8, "head_dim": 8,
         "ffn_dim": 16, "position_embedding": "sinusoidal", "max_position_embeddings": 50},
        20,  # Géron's split, as the Bahdanau recipe
    ),
    "vaswani_spa_eng_chollet": (
        ["model.d_model=16", "model.head_dim=8", "model.ffn_dim=32"],
        {"encoder_layers": 1, "num_heads": 8, "head_dim": 8, "head_dropout": 0.5,
         "position_embedding": "learned", "max_position_embeddings": 20},
        36,  # Chollet's 70/15/15 split of the 240 pairs
    ),
    "vaswani_spa_eng_base": (
        ["model.encoder_layers=1", "model.decoder_layers=1", "model.d_model=16",
         "model.num_heads=2", "model.ffn_dim=32", "tokenizer.vocab_size=300",
         "training.warmup_steps=2", "training.mixed_precision=no"],
        {"encoder_layers": 1, "d_model": 16, "num_heads": 2, "dropout": 0.1,
         "label_smoothing": 0.1, "norm_position": "post", "position_embedding": "sinusoidal",
         "tie_word_embeddings": True},
        36,  # the default (Chollet's) 70/15/15 split
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(SPA_RECIPES))
def test_spa_recipe_trains_on_a_local_spa_txt(tmp_path, caplog, name):
    lines = [f"I have {n} apples.\tTengo {n} manzanas.\tCC-BY 2.0 (France)" for n in range(240)]
    lines.insert(7, "a line without a tab")
    spa = tmp_path / "spa.txt"
    spa.write_text("\n".join(lines) + "\n", encoding="utf-8")
    model_overrides, expected, held_out = SPA_RECIPES[name]
    overrides = [
        f"data.source={spa}",
        *model_overrides,
        "training.max_steps=4",
        "training.eval_every=4",
        "training.save_every=4",
        "evaluation.splits=[test]",
        f"output_dir={tmp_path / 'run'}",
    ]
    with caplog.at_level(logging.WARNING):
        result = run_recipe(load_recipe(f"recipes/{name}.yaml", overrides))
    assert "spa.txt: 1 malformed line(s) skipped" in caplog.text and "at line 8:" in caplog.text
    assert result.progress.step == 4
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert {key: config[key] for key in expected} == expected
    assert result.metrics["test"]["num_examples"] == held_out
