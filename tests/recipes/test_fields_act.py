"""No recipe field is accepted and then ignored: every field acts in the task and family it is
set for, or the recipe is refused when it loads, in one line naming the field.

One shipped recipe of each task and family (the char-RNN, GPT-2 with LoRA, Bahdanau and
Vaswani translation, the RNN classifier with word vectors, a pretrained classifier with LoRA,
and the baseline recipe, trained and run through ``hfattn baseline``) runs tiny and in process:
a training step, a validation, the final scores, the sample and the model card. Every section
of the loaded recipe records the fields that the run reads (:class:`FieldReads`). Then every
field of every section class, optional sections included, is either read by that family's run,
or setting it to a value other than its default is refused by the checks ``load_recipe`` makes
before torch (the sections' and the recipe's ``__post_init__``, then
:func:`~hfattn.recipes.run_checks.check_before_training`), naming the field or its section.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import sys
import types
import typing
from pathlib import Path

import pytest

from hfattn.cli import main as cli_main
from hfattn.common.field_checks import field_default
from hfattn.data.prepared import ROOT_VARIABLE
from hfattn.data.shakespeare import play_text
from hfattn.recipes import RecipeError, Run, check_recipe_values, load_recipe, recipe_class
from hfattn.recipes.field_types import field_hints
from hfattn.recipes.run_checks import check_before_training
from tests.helpers.recipe_helpers import corpus_file
from tests.helpers.tiny_pretrained import tiny_distilbert_folder, tiny_gpt2_folder

pytest.importorskip("peft", reason="peft is not installed: the LoRA recipes cannot run")

RECIPES = Path(__file__).resolve().parents[2] / "recipes"

SHORT_RUN = [
    "training.max_steps=1",
    "training.max_minutes=null",
    "training.warmup_steps=0",
    "training.log_every=1",
    "training.eval_every=1",
    "training.save_every=1",
    "training.mixed_precision=no",
]
"""One step, a validation (the best model kept by its metric) and a checkpoint."""

FAMILIES = {
    "char-rnn": ("char_rnn_shakespeare.yaml", [
        "data.source={text}", "model.embedding_dim=8", "model.hidden_size=16",
        "model.neural_cache_size=20", "training.batch_size=4", "training.seq_len=16",
        "evaluation.batch_size=2", "evaluation.seq_len=16", "generation.max_new_tokens=5",
    ]),
    "gpt2-lora": ("gpt2_shakespeare_lora.yaml", [
        "model={gpt2}", "data.source={text}", "training.block_size=16", "training.batch_size=4",
        "evaluation.batch_size=2", "evaluation.seq_len=16", "generation.max_new_tokens=5",
    ]),
    "bahdanau": ("bahdanau_dates_en_es.yaml", [
        "data.size=100", "model.embedding_dim=8", "model.encoder_hidden_size=8",
        "model.decoder_hidden_size=16", "training.batch_size=16", "evaluation.batch_size=64",
        "evaluation.max_new_tokens=8", "generation.num_beams=1", "generation.max_new_tokens=8",
    ]),
    "vaswani": ("vaswani_bible_en_es_base.yaml", [
        "data.source=dates", "data.size=100", "tokenizer.vocab_size=100",
        "model.encoder_layers=1", "model.decoder_layers=1", "model.d_model=16",
        "model.num_heads=2", "model.ffn_dim=16", "training.token_budget=400",
        "training.length_buckets=2", "evaluation.batch_size=64", "evaluation.max_examples=4",
        "evaluation.max_new_tokens=8", "generation.num_beams=2", "generation.max_new_tokens=8",
    ]),
    "rnn-classifier": ("rnn_classifier_genre_word2vec.yaml", [
        "data.source={labelled}", "data.train_size=30", "data.max_length=16",
        "model.embedding_dim=8", "model.hidden_size=8", "word_vectors.epochs=1",
        "word_vectors.min_count=1", "training.batch_size=16",
    ]),
    "pretrained-classifier": ("minilm_genre_lora.yaml", [
        "model={distilbert}", "lora.target_modules=[q_lin,v_lin]", "data.source={labelled}",
        "data.max_length=16", "training.batch_size=8",
    ]),
    "baseline": ("baseline_reviews_es.yaml", [
        "word_vectors.train=cbow", "word_vectors.epochs=1", "model.embedding_dim=8",
        "model.hidden_size=8",
    ]),
}  # fmt: skip
"""Family → its shipped recipe and the ``--set`` overrides that make it tiny (after
:data:`SHORT_RUN`; ``{text}``, ``{labelled}``, ``{gpt2}``, ``{distilbert}``: the files of
:func:`inputs`). The baseline recipe also gets word vectors: an ``rnn-classifier`` recipe takes
them."""

ALTERNATIVES = {
    "data.source": "numbers",
    "data.text_column": "content",
    "data.label_column": "genre",
    "data.translation_column": "pairs",
    "data.preprocessing": "chollet",
    "data.on_too_long": "error",
    "data.source_lang": "es",
    "data.target_lang": "en",
    "tokenizer.type": "bpe",
    "tokenizer.bpe_dropout": 0.1,
    "training.mode": "stateless",
    "training.group_by_length": "target",
    "training.betas": [0.9, 0.98],
    "training.optimizer": "nadam",
    "training.compile": "regional",
    "training.r_drop_alpha": 1.0,
    "training.word_dropout": 0.1,
    "evaluation.splits": ["test"],
    "generation.prompt": "ROMEO:",
    "generation.examples": ["hello"],
    "hub.repo_id": "me/tiny",
    "hub.license": "mit",
    "hub.license_name": "my-license",
    "hub.license_link": "https://example.com/license",
    "hub.language": ["es"],
    "hub.tags": ["tiny"],
    "hub.datasets": ["me/data"],
    "hub.base_model": "me/base",
    "lora.target_modules": ["lm_head"],
    "lora.modules_to_save": ["lm_head"],
    "lora.bias": "all",
    "word_vectors.train": "skipgram",
    "word_vectors.path": "vectors.txt",
    "word_vectors.unknown": "zero",
}
"""A valid value other than the default of the fields whose type alone does not give one
(strings and lists): what :func:`other_value` sets to see a field refused."""

DECLARED = {
    ("char-rnn", "tokenizer.type"): "pretrained",
    ("gpt2-lora", "tokenizer.type"): "char",
}
"""A causal LM's ``tokenizer.type`` names the tokenizer that ``model:`` implies (``auto`` picks
it; ``CausalLMRecipe.__post_init__`` reads it when the recipe loads): the type that does not
fit the family is the value that must be refused."""

OPTIONAL_SECTIONS = {
    "lora": {"r": 4},
    "tokenizer": {"type": "word"},
    "word_vectors": {"train": "cbow"},
}
"""The smallest valid form of each optional section: setting it where the family's recipe has
none must be refused (the run read none of its fields)."""


class FieldReads:
    """Records the fields of recipe sections that code reads: :meth:`watch` turns a section
    (a dataclass instance) into one of a subclass whose ``__getattribute__`` notes every field
    read outside the copies and dumps of ``dataclasses``, ``copy`` and ``omegaconf``
    (``recipe.yaml``, the key of prepared data: no field acts by being written out)."""

    QUIET = ("dataclasses", "copy", "omegaconf")

    def __init__(self):
        self.read: set[str] = set()

    def watch(self, section, prefix: str, aliases: dict[str, str] | None = None):
        """Record the reads of ``section``'s fields as ``prefix.field`` (an attribute of
        ``aliases`` as the field it names); returns ``section``."""
        keys = {f.name: f"{prefix}.{f.name}" if prefix else f.name
                for f in dataclasses.fields(section)}  # fmt: skip
        keys.update(aliases or {})
        read, quiet = self.read, self.QUIET

        def __getattribute__(obj, name):
            if name in keys:
                caller = sys._getframe(1).f_globals.get("__name__", "")
                if caller.split(".")[0] not in quiet:
                    read.add(keys[name])
            return object.__getattribute__(obj, name)

        cls = type(section)
        watched = type(cls.__name__, (cls,), {"__getattribute__": __getattribute__})
        object.__setattr__(section, "__class__", watched)  # a frozen one too
        return section

    def watch_recipe(self, recipe):
        """Record the reads of ``recipe``'s own fields and of every section it holds; the
        model config built from ``model:`` when the recipe loaded is ``model`` read."""
        for name in field_hints(type(recipe)):
            value = getattr(recipe, name)
            if dataclasses.is_dataclass(value):
                self.watch(value, name)
        return self.watch(recipe, "", aliases={"model_config": "model"})


def section_classes(cls) -> dict[str, type]:
    """Section name → its dataclass, for the recipe class ``cls`` (``lora: LoraSection |
    None`` → ``LoraSection``)."""
    sections = {}
    for name, hint in field_hints(cls).items():
        union = typing.get_origin(hint) in (typing.Union, types.UnionType)
        found = [h for h in (typing.get_args(hint) if union else (hint,))
                 if dataclasses.is_dataclass(h)]  # fmt: skip
        if found:
            sections[name] = found[0]
    return sections


def other_value(section: type, name: str, key: str):
    """A value of field ``key`` other than its default (:data:`ALTERNATIVES`, else from its
    type)."""
    if key in ALTERNATIVES:
        return ALTERNATIVES[key]
    default = field_default(section, name)
    hint = field_hints(section)[name]
    if isinstance(default, bool):
        return not default
    if isinstance(default, int):
        return default + 1
    if isinstance(default, float):
        return default / 2
    if default is None and hint in (int | None, float | None):
        return 2
    if default is None and hint == bool | None:
        return True
    raise AssertionError(f"{key}: add a value other than {default!r} to ALTERNATIVES")


def refusal(recipe, section: str, changes: dict) -> str | None:
    """The ``RecipeError`` of ``recipe`` with ``changes`` made to its ``section`` (``None``:
    the section's defaults) through the checks of a recipe load that need no torch: the
    section's ``__post_init__``, the recipe's, then the checks before a new run (``None``
    when they all pass)."""
    try:
        current = getattr(recipe, section)
        if current is None:
            changed = section_classes(type(recipe))[section](**changes)
        else:
            changed = dataclasses.replace(current, **changes)
        check_before_training(dataclasses.replace(recipe, **{section: changed}), overwrite=True)
    except RecipeError as err:
        return str(err)
    return None


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, str]:
    """The corpus, the labelled texts and the tiny pretrained folders the recipes read."""
    root = tmp_path_factory.mktemp("inputs")
    labelled = root / "labelled.csv"
    with open(labelled, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        for play, genre in (("macbeth", "tragedy"), ("twelfth-night", "comedy")):
            lines = [line for line in play_text(play).splitlines() if len(line) > 30]
            writer.writerows((line, genre) for line in lines[:20])
    return {
        "text": str(corpus_file(root, chars=4000)),
        "labelled": str(labelled),
        "gpt2": str(tiny_gpt2_folder(root, n_layer=1, n_embd=16, vocab_size=300)),
        "distilbert": str(tiny_distilbert_folder(root, n_layers=1, dim=16, hidden_dim=16)),
    }


def family_overrides(family: str, inputs: dict, out: Path) -> list[str]:
    """The ``--set`` items of ``family``'s tiny run into ``out``."""
    _, extra = FAMILIES[family]
    return [*SHORT_RUN, *(item.format(**inputs) for item in extra), f"output_dir={out}"]


def run_and_record(family: str, inputs: dict, out: Path) -> set[str]:
    """Train ``family``'s recipe tiny, score it, render its card (and for the baseline recipe
    run ``hfattn baseline``), recording every field read."""
    from hfattn.commands.baseline import run_pairs
    from hfattn.hub.card import render_model_card
    from hfattn.hub.folder_inspection import inspect_folder
    from hfattn.orchestration.run import run_recipe

    recipe_file, _ = FAMILIES[family]
    overrides = family_overrides(family, inputs, out)
    reads = FieldReads()
    recipe = reads.watch_recipe(load_recipe(RECIPES / recipe_file, overrides, run=Run()))
    result = run_recipe(recipe)
    assert not result.interrupted and (out / "eval_results.json").is_file()
    folder = inspect_folder(out)
    reads.watch(folder.hub, "hub")  # the card's metadata: the recipe's hub section
    render_model_card(folder, "me/tiny")
    if family == "baseline":
        args = argparse.Namespace(
            vectorizer=["tfidf"],
            classifier=["nb"],
            stop_words=None,
            tokens=None,
            ngram_max=1,
            output_root=str(out.parent),
        )
        run_pairs(recipe, args)
    return reads.read


@pytest.mark.slow
@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_field_acts_in_its_family_or_is_refused_at_load(
    family, inputs, tmp_path, monkeypatch
):
    # data prepared afresh: a field that builds it is read, whatever ran before
    monkeypatch.setenv(ROOT_VARIABLE, str(tmp_path / "prepared"))
    read = run_and_record(family, inputs, tmp_path / "run")
    recipe_file, _ = FAMILIES[family]
    overrides = family_overrides(family, inputs, tmp_path / "refused")
    recipe = check_recipe_values(RECIPES / recipe_file, overrides)
    sections = section_classes(recipe_class(recipe.task))
    problems = [f"{name}: never read" for name in field_hints(type(recipe))
                if name not in sections and name not in read]  # fmt: skip
    for name, section in sections.items():
        if getattr(recipe, name) is None:  # an optional section this recipe does not have
            message = refusal(recipe, name, OPTIONAL_SECTIONS[name])
            if message is None or not message.startswith(name):
                problems.append(f"{name}: accepted by {family}, never read ({message})")
            continue
        for field in dataclasses.fields(section):
            key = f"{name}.{field.name}"
            if key in read:
                continue
            value = DECLARED.get((family, key)) or other_value(section, field.name, key)
            message = refusal(recipe, name, {field.name: value})
            if message is None or not message.startswith((f"{key}:", f"{name}:")):
                problems.append(f"{key}={value}: accepted by {family}, never read ({message})")
    assert problems == []


def test_lora_in_a_translation_recipe_is_refused_before_anything_is_written(tmp_path, capsys):
    """A translation recipe's ``lora:`` was stored in ``recipe.yaml`` and the full model
    trained, no adapter, no word (the overrides after ``lora`` keep such a run short)."""
    out = tmp_path / "run"
    overrides = [
        "lora.r=4",
        "lora.target_modules=[q_proj,v_proj]",
        f"output_dir={out}",
        *SHORT_RUN,
        "data.source=dates",
        "data.size=100",
        "model.encoder_layers=1",
        "model.decoder_layers=1",
        "model.d_model=16",
        "model.num_heads=2",
        "model.ffn_dim=16",
        "evaluation.max_examples=4",
        "evaluation.max_new_tokens=8",
        "generation.max_new_tokens=8",
    ]
    argv = ["train", str(RECIPES / "vaswani_bible_en_es.yaml")]
    assert cli_main([*argv, *(x for o in overrides for x in ("--set", o))]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: lora: does not apply to the translation task")
    assert "peft.LoraConfig" in err and len(err.splitlines()) == 1
    assert not out.exists()


SPA_TXT = "I have 2 apples.\tTengo 2 manzanas.\n"
"""A ``spa.txt`` line: :func:`test_a_field_that_other_settings_leave_unused_is_refused` writes a
file of it for the recipes that read one."""

UNUSED_BY_SETTINGS = [
    ("vaswani_dates_en_es.yaml", ["training.optimizer=sgd"], "training.betas: [0.9, 0.98]"),
    ("char_rnn_shakespeare.yaml", ["generation.do_sample=false"], "generation.temperature: 0.8"),
    ("bahdanau_dates_en_es.yaml", ["generation.seed=1"], "generation.seed: 1 is not used"),
    ("bahdanau_dates_en_es.yaml", ["generation.top_k=5"], "generation.top_k: 5 is not used"),
    ("char_rnn_shakespeare.yaml", ["data.source=shakespeare", "data.test_fraction=0.1"],
     "data.test_fraction: 0.1 is not used by the embedded source shakespeare"),
    ("char_rnn_shakespeare.yaml", ["data.source={spa}", "data.text_column=line"],
     "data.text_column: 'line' is not used by the plain text file"),
    ("rnn_classifier_genre.yaml", ["data.label_column=genre"],
     "data.label_column: 'genre' is not used by the embedded source genre"),
    ("rnn_classifier_reber.yaml", ["data.validation_fraction=0.2"],
     "data.validation_fraction: 0.2 is not used by the embedded source reber"),
    ("bahdanau_bible_en_es.yaml", ["data.test_fraction=0.1"],
     "data.test_fraction: 0.1 is not used by bible: its held-out splits are whole books"),
    ("bahdanau_bible_en_es.yaml", ["data.max_held_out_pairs=100"],
     "data.max_held_out_pairs: 100 is not used by bible"),
    ("char_rnn_shakespeare.yaml", ["data.source=shakespeare", "data.max_held_out_chars=1000"],
     "data.max_held_out_chars: 1000 is not used by the embedded source shakespeare"),
    ("bahdanau_dates_en_es.yaml", ["data.translation_column=pairs"],
     "data.translation_column: 'pairs' is not used by the embedded source dates"),
    ("vaswani_spa_eng_chollet.yaml", ["data.source={spa}", "data.train_size=100"],
     "data.train_size: 100 is not used without data.preprocessing: geron"),
    ("rnn_classifier_genre.yaml", ["word_vectors.path=vectors.txt", "word_vectors.window=3"],
     "word_vectors.window: 3 is not used with word_vectors.path"),
    ("bahdanau_dates_en_es.yaml", ["model={text}"], "model.pretrained: does not apply to the "
     "translation task"),
]  # fmt: skip
"""Fields that are read in some settings and unused in these (each recipe's run reads them, so
the walk above cannot tell): ``(recipe, --set items, the start of the refusal)``."""


@pytest.mark.parametrize(("recipe", "overrides", "refused"), UNUSED_BY_SETTINGS)
def test_a_field_that_other_settings_leave_unused_is_refused(recipe, overrides, refused, tmp_path):
    spa = tmp_path / "spa.txt"
    spa.write_text(SPA_TXT * 10, encoding="utf-8")
    items = [o.format(spa=spa, text=tmp_path) for o in overrides]
    with pytest.raises(RecipeError) as err:
        check_recipe_values(RECIPES / recipe, items)  # no torch, no model config
    assert str(err.value).startswith(refused)


@pytest.mark.parametrize(
    ("family", "fan_in_fan_out", "layers"),
    [("gpt2-lora", "false", "GPT-2's Conv1D"), ("pretrained-classifier", "true", "nn.Linear")],
)
def test_a_lora_fan_in_fan_out_that_fits_no_targeted_layer_is_refused(
    family, fan_in_fan_out, layers, inputs, tmp_path
):
    """PEFT takes the value from each layer's kind and overrides the recipe's with a warning."""
    from hfattn.orchestration.run import build_job

    recipe_file, _ = FAMILIES[family]
    overrides = [
        *family_overrides(family, inputs, tmp_path),
        f"lora.fan_in_fan_out={fan_in_fan_out}",
    ]
    with pytest.raises(RecipeError) as err:
        build_job(load_recipe(RECIPES / recipe_file, overrides))
    assert str(err.value).startswith(f"lora.fan_in_fan_out: {fan_in_fan_out} does not fit")
    assert layers in str(err.value)


def test_a_sampled_translation_sample_follows_generation_seed(inputs, tmp_path):
    """Once ``generation.seed`` was read and dropped: a sampled translation sample differed
    from run to run."""
    from hfattn.orchestration.run import build_job

    recipe_file, _ = FAMILIES["bahdanau"]
    overrides = [*family_overrides("bahdanau", inputs, tmp_path), "generation.do_sample=true"]
    samples = {}
    for seed in (0, 0, 1):
        job = build_job(load_recipe(RECIPES / recipe_file, [*overrides, f"generation.seed={seed}"]))
        samples.setdefault(seed, []).append(job.sample(job.model))
    assert samples[0][0] == samples[0][1] != samples[1][0]
