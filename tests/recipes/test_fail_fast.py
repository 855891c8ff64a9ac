"""Fail fast (issue 21): every check of ``hfattn train`` that needs neither data nor the run
folder answers within 2 s, before torch is imported
(``hfattn.recipes.run_checks.check_before_training``
on the recipe's outline); the run folder is checked once the recipe is fully loaded, so that
any bad field comes first; a ``data.source`` typo fails at once for every task; a time-bounded
run's progress
bar follows the clock to 100 %; other libraries' noise is quiet unless ``hfattn -v``.

The timed checks run in fresh interpreters: this test process has imported torch already.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hfattn.data.sources import check_source
from hfattn.recipes import task_recipe
from hfattn.tasks import TASK_NAMES, get_task
from tests.helpers.network import RECORD_CONNECTIONS
from tests.helpers.recipe_helpers import small_recipe, write_recipe

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "recipes"
HEAVY = ("torch", "transformers", "accelerate", "datasets")
"""What an early error must not import (it took 4 to 50 s: these imports, and Hub retries)."""

# `hfattn ARGV` in a fresh interpreter; the last stdout line reports the exit status, which
# heavy modules were imported by then and the network connections attempted
RUN_CLI = (
    RECORD_CONNECTIONS
    + """
import json
from hfattn.cli import main
code = main(json.loads(sys.argv[1]))
heavy = [m for m in json.loads(sys.argv[2]) if m in sys.modules]
print(json.dumps({"code": code, "heavy": heavy, "connections": connections}))
"""
)


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a CLI subprocess: no token, an empty ``HF_HOME``-less Hub setting is
    left to the caller; one thread."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HF_HUB_OFFLINE")}
    return {**env, "OMP_NUM_THREADS": "1", **extra}


def early_error(argv: list[str], cwd: Path, **env: str) -> tuple[str, list[str], list[str]]:
    """Run ``hfattn ARGV`` (expected to fail with status 2); return its stderr, the heavy
    modules it imported and its connection attempts."""
    result = subprocess.run(
        [sys.executable, "-c", RUN_CLI, json.dumps(argv), json.dumps(HEAVY)],
        cwd=cwd,
        env=clean_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["code"] == 2, result.stderr
    return result.stderr, report["heavy"], report["connections"]


def assert_one_error(argv: list[str], cwd: Path, expected: str, **env: str):
    """``hfattn ARGV`` fails with one error line holding ``expected``; returns its stderr, the
    heavy modules it imported and its connection attempts."""
    err, heavy, connections = early_error(argv, cwd, **env)
    assert expected in err, err
    assert err.count("error: ") == 1, err
    return err, heavy, connections


def assert_fast_error(argv: list[str], cwd: Path, expected: str, **env: str) -> str:
    """The error comes at once: before any heavy import and without trying the network.
    Returns its stderr."""
    err, heavy, connections = assert_one_error(argv, cwd, expected, **env)
    assert heavy == [], f"imported {heavy} before the error"
    assert connections == [], f"tried the network ({connections}) before {err.strip()}"
    return err


# ---- 1. every check that needs no data, before any loading ----------------------------------
@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """A tiny causal-LM recipe (a slice of Macbeth) whose output_dir already holds a run."""
    folder = tmp_path_factory.mktemp("tiny")
    recipe = write_recipe(folder, training={"schedule": "cosine", "warmup_steps": 10})
    (folder / "run" / "checkpoints" / "step-5").mkdir(parents=True)
    return recipe


CHECKS = {
    "max_steps within the warmup": (
        ["--set", "training.max_steps=10"],
        "training.max_steps: 10 steps end the run within its 10 warmup steps"),
    "warmup with a schedule that sets its own": (
        ["--set", "training.schedule=warmup_untuned_linear"],
        "training.warmup_steps: the warmup_untuned_linear schedule sets its own warmup length"),
    "a schedule that needs warmup steps": (
        ["--set", "training.schedule=noam", "--set", "training.warmup_steps=0"],
        "training.warmup_steps: the noam schedule needs warmup_steps >= 1"),
    "a metric the task does not report": (
        ["--set", "training.metric_for_best_model=bleu"],
        "training.metric_for_best_model: 'bleu' is not one of loss, perplexity, bits_per_char, "
        "accuracy"),
    "a bad repo id": (
        ["--set", "hub.push_to_hub=true", "--set", "hub.repo_id=me/a..b"],
        "hub: repo_id must be 'owner/name'"),
    "no token to push with": (
        ["--set", "hub.push_to_hub=true", "--set", "hub.repo_id=me/tiny"],
        "hub: no Hugging Face token"),
    "a field of the wrong type": (
        ["--set", "training.max_steps=many"],
        "training.max_steps: 'many' is not an integer or null"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CHECKS))
def test_checks_that_need_no_data_answer_within_two_seconds(case, tiny, tmp_path):
    extra, expected = CHECKS[case]
    argv = ["train", str(tiny), "--set", f"output_dir={tmp_path / 'run'}", *extra]
    assert_fast_error(argv, tmp_path, expected, HF_HOME=str(tmp_path / "hf"))


FOLDER_CHECKS = {
    "output_dir holds a run": (
        [], "already holds a run (checkpoints); continue it with `hfattn train --resume"),
    "resume without a checkpoint": (["--resume"], "--resume: no checkpoint under "),
}  # fmt: skip
"""The run folder's checks: made once the recipe is fully loaded, before any data."""


@pytest.mark.parametrize("case", sorted(FOLDER_CHECKS))
def test_the_run_folder_is_checked_before_any_data(case, tiny, tmp_path, monkeypatch, capsys):
    """Not timed, so in this process: a fresh interpreter would spend seconds importing torch
    for the model config that the recipe's full load builds before ``--resume`` looks for a
    checkpoint."""
    from hfattn.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    extra, expected = FOLDER_CHECKS[case]
    output = tiny.parent / "run" if case == "output_dir holds a run" else tmp_path / "run"
    assert main(["train", str(tiny), "--set", f"output_dir={output}", *extra]) == 2
    err = capsys.readouterr().err
    assert expected in err, err
    assert err.count("error: ") == 1, err
    assert not (tmp_path / "run").exists()


LOADED_FIELD_ERRORS = {
    "a misspelt model config field": (
        ["--set", "model.hiden_size=64"],
        "model.hiden_size: is not a field of CharRNNConfig; did you mean 'hidden_size'?"),
    "a batch size out of range": (
        ["--set", "training.batch_size=-8"], "training.batch_size: must be > 0, got -8"),
    "an unknown optimizer": (
        ["--set", "training.optimizer=lbfgs"],
        "training.optimizer: 'lbfgs' is not one of adamw, nadam, rmsprop, radam, sgd, muon"),
}  # fmt: skip
"""Errors that only the full load finds (the model's config class, the sections' value
checks)."""


@pytest.mark.parametrize("case", sorted(LOADED_FIELD_ERRORS))
def test_a_field_error_of_the_full_load_comes_before_the_output_folder(case, tiny, tmp_path):
    """The output folder holds a run: the bad field is what the user is told, not
    "use --overwrite"."""
    extra, expected = LOADED_FIELD_ERRORS[case]
    argv = ["train", str(tiny), "--set", f"output_dir={tiny.parent / 'run'}", *extra]
    assert_one_error(argv, tmp_path, expected, HF_HOME=str(tmp_path / "hf"))


FIELD_TYPOS = {
    "a misspelt training field": (
        "char_rnn_shakespeare.yaml", ["--set", "training.lerning_rate=0.01"],
        "training.lerning_rate: not a field of training (batch_size, "),
    "a misspelt section": (
        "char_rnn_shakespeare.yaml", ["--set", "generaton.max_new_tokens=5"],
        "generaton: not a field of a recipe (name, task, "),
    "a misspelt task-specific field": (
        "vaswani_dates_en_es.yaml", ["--set", "data.on_to_long=error"],
        "data.on_to_long: not a field of data ("),
    "a misspelt score of bahdanau": (
        "bahdanau_dates_en_es.yaml", ["--set", "model.score=dott"],
        "model.score must be one of dot, scaled_dot, "),
    "a misspelt score of vaswani": (
        "vaswani_dates_en_es.yaml", ["--set", "model.attention_score=addative"],
        "model.attention_score must be one of dot, scaled_dot, "),
    "a misspelt score of the rnn classifier": (
        "rnn_classifier_genre.yaml", ["--set", "model.attention_score=dott"],
        "model.attention_score must be one of dot, scaled_dot, "),
}  # fmt: skip
"""A recipe field that is not one the recipe class (or the model's attention) allows."""
SUGGESTIONS = {
    "a misspelt training field": "did you mean 'learning_rate'?",
    "a misspelt section": "did you mean 'generation'?",
    "a misspelt task-specific field": "did you mean 'on_too_long'?",
    "a misspelt score of bahdanau": "did you mean 'dot'?",
    "a misspelt score of vaswani": "did you mean 'additive'?",
    "a misspelt score of the rnn classifier": "did you mean 'dot'?",
}


@pytest.mark.parametrize("case", sorted(FIELD_TYPOS))
def test_a_misspelt_field_is_reported_before_the_output_folder_that_holds_a_run(case, tmp_path):
    """The output folder already holds a run: the typo is what the user is told, at once."""
    recipe, extra, expected = FIELD_TYPOS[case]
    (tmp_path / "run" / "checkpoints" / "step-5").mkdir(parents=True)
    argv = ["train", str(RECIPES / recipe), "--set", f"output_dir={tmp_path / 'run'}", *extra]
    assert SUGGESTIONS[case] in assert_fast_error(argv, tmp_path, expected)


def test_the_default_output_folder_of_a_finished_run_does_not_hide_a_typo(tmp_path):
    """``hfattn train RECIPE`` with the recipe's own ``output_dir`` (``runs/NAME``, relative
    to the working folder) where an earlier run lies."""
    recipe = tmp_path / "char_rnn_shakespeare.yaml"
    recipe.write_text((RECIPES / recipe.name).read_text())
    argv = ["train", str(recipe), "--set", "training.lerning_rate=0.01"]
    (tmp_path / "runs" / "char_rnn_shakespeare" / "checkpoints" / "step-5").mkdir(parents=True)
    (tmp_path / "runs" / "char_rnn_shakespeare" / "model.safetensors").write_bytes(b"")
    assert_fast_error(argv, tmp_path, "training.lerning_rate: not a field of training")
    err, _, _ = early_error(argv[:2], tmp_path)  # the typo fixed: now the folder
    assert "already holds a run" in err and "--overwrite" in err, err


def test_every_shipped_recipe_passes_the_outline_without_torch():
    """The outline's key, type and score checks and every section's value checks accept every
    shipped recipe (no false alarm), and import no heavy library."""
    probe = (
        "import glob, json, sys, hfattn.tasks\n"
        "from hfattn.recipes import check_recipe_values, recipe_outline\n"
        f"names = sorted(glob.glob({str(RECIPES / '*.yaml')!r}))\n"
        "tasks = [recipe_outline(name).task for name in names]\n"
        "recipes = [check_recipe_values(name) for name in names]\n"
        f"print(json.dumps([len(names), [m for m in {list(HEAVY)!r} if m in sys.modules]]))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    count, heavy = json.loads(out.stdout)
    assert count == len(list(RECIPES.glob("*.yaml"))) > 20 and heavy == []


def test_the_torch_free_score_names_are_the_registered_scores():
    """:data:`SCORE_NAMES` (read before torch) lists :data:`SCORES` in order, and every config
    field that takes a score is declared with them."""
    from hfattn.common.models_source import models_literal
    from hfattn.models import AUTO_CLASSES
    from hfattn.models.config_checks import field_rules
    from hfattn.models.score_names import SCORE_NAMES
    from hfattn.models.scores import SCORES

    assert SCORE_NAMES == tuple(SCORES) == models_literal("score_names", "SCORE_NAMES")
    assert [cls.name for cls in SCORES.values()] == list(SCORE_NAMES)
    configs = {config.model_type: config for config, _, _ in AUTO_CLASSES}
    scored = {t: {f for f in ("score", "attention_score") if f in field_rules(c)}
              for t, c in configs.items()}  # fmt: skip
    assert scored == {"char-rnn": set(), "bahdanau": {"score"},
                      "vaswani": {"attention_score"}, "rnn-classifier": {"attention_score"}}  # fmt: skip
    for model_type, (field_name,) in ((t, f) for t, f in scored.items() if f):
        assert field_rules(configs[model_type])[field_name].allowed == SCORE_NAMES
        with pytest.raises(ValueError, match=f"{field_name} must be one of dot, scaled_dot"):
            configs[model_type](**{field_name: "dott"})
        configs[model_type](**{field_name: "general"})


def test_a_misspelt_model_field_is_named_with_the_closest_field(tmp_path):
    """The model's config fields are :func:`load_recipe`'s (they need the config class)."""
    from hfattn.recipes import RecipeError, load_recipe

    recipe = RECIPES / "char_rnn_shakespeare.yaml"
    with pytest.raises(RecipeError, match=r"^model\.hiden_size: is not a field of CharRNNConfig; "
                       r"did you mean 'hidden_size'\?$"):  # fmt: skip
        load_recipe(recipe, ["model.hiden_size=8"])
    with pytest.raises(RecipeError, match=r"^training\.lerning_rate: not a field of training .*"
                       r"did you mean 'learning_rate'\?$"):  # fmt: skip
        load_recipe(recipe, ["training.lerning_rate=0.1"])


def test_a_run_to_publish_without_a_license_is_refused_before_loading(tiny, tmp_path):
    """The tiny recipe trains on a local file, whose licence hfattn cannot know."""
    argv = ["train", str(tiny), "--set", f"output_dir={tmp_path / 'run'}"]
    argv += ["--set", "hub.push_to_hub=true", "--set", "hub.repo_id=me/tiny"]
    expected = "hub.license: not set and the license of data.source"
    assert_fast_error(argv, tmp_path, expected, HF_HOME=str(tmp_path / "hf"), HF_TOKEN="hf_x")


def test_a_run_folder_given_to_resume_is_checked_before_loading(tiny, tmp_path):
    """``hfattn train --resume RUN_FOLDER --set ...`` checks the stored recipe's outline."""
    folder = tiny.parent / "run"
    (folder / "recipe.yaml").write_text(tiny.read_text())
    (folder / "checkpoints" / "step-5" / "progress.json").write_text("{}")
    assert_fast_error(
        ["train", "--resume", str(folder), "--set", "training.max_steps=3"],
        tmp_path,
        "training.max_steps: 3 steps end the run within its 10 warmup steps",
    )


def test_a_resume_may_end_a_run_within_its_warmup_where_the_schedule_allows():
    """``hfattn train --resume RUN --set training.max_steps=STEP`` saves an interrupted run's
    model; only schedules that decay to the last step cannot be built for it."""
    from types import SimpleNamespace

    from hfattn.training.schedules import check_schedule_steps

    for name in ("constant", "noam", "warmup_linear"):
        check_schedule_steps(
            SimpleNamespace(schedule=name, warmup_steps=10, max_steps=5), resume=True
        )
    for name in ("linear", "cosine"):
        cfg = SimpleNamespace(schedule=name, warmup_steps=10, max_steps=5)
        with pytest.raises(ValueError, match="training.max_steps: 5 steps end the run within"):
            check_schedule_steps(cfg, resume=True)


def test_the_data_size_check_names_the_epochs(tmp_path, capsys):
    """Where the warmup must fit the epochs' steps, the engine says so once the data is
    loaded, naming the numbers (it was the schedule factory's ``total_steps`` message)."""
    from hfattn.cli import main

    recipe = write_recipe(
        tmp_path,
        training={
            "max_steps": None,
            "epochs": 1,
            "schedule": "linear",
            "warmup_steps": 10_000,
        },  # fmt: skip
    )
    assert main(["train", str(recipe)]) == 2
    err = capsys.readouterr().err
    assert "training.warmup_steps: 10000 warmup steps do not fit in this run's" in err
    assert "1 epoch(s) × " in err and "steps per epoch of this data" in err


def test_each_task_recipe_module_is_light_and_names_what_validation_reports():
    """The checks before training read ``REPORTED_METRICS`` from the task's ``recipe`` module,
    which imports no heavy library; the task's job records the same metrics."""
    probe = (
        "import json, sys, hfattn.tasks; from hfattn.recipes import task_names, task_recipe\n"
        "metrics = {t: list(task_recipe(t).reported_metrics) for t in task_names()}\n"
        f"print(json.dumps([metrics, [m for m in {list(HEAVY)!r} if m in sys.modules]]))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    metrics, heavy = json.loads(out.stdout)
    assert heavy == [] and set(metrics) == set(TASK_NAMES)
    for name in TASK_NAMES:
        recipe_module = sys.modules[task_recipe(name).recipe_class.__module__]
        metadata = get_task(name).card_metadata(("d", "d"), recipe_module.METRIC_NAMES)
        assert metrics[name] == list(metadata["reported_metrics"]), name


# ---- 2. data.source typos, every task -------------------------------------------------------
TYPOS = {
    "classification": ("rnn_classifier_genre.yaml", "genr",
                       "data.source: 'genr' is not an embedded dataset (genre, reber, reviews-es), "
                       "an existing file, or a Hub dataset id; did you mean 'genre'?"),
    "causal-lm": ("char_rnn_shakespeare.yaml", "shakespear",
                  "data.source: 'shakespear' is not an embedded dataset (shakespeare), an "
                  "existing file, or a Hub dataset id; did you mean 'shakespeare'?"),
    "translation": ("vaswani_dates_en_es.yaml", "date",
                    "data.source: 'date' is not an embedded dataset (bible, bible+kjv, dates, numbers, "
                    "date-normalization), an existing file, or a Hub dataset id; did you mean "
                    "'dates'?"),
}  # fmt: skip


@pytest.mark.parametrize("task", sorted(TYPOS))
def test_a_data_source_typo_fails_at_once(task, tmp_path):
    recipe, typo, expected = TYPOS[task]
    argv = ["train", str(RECIPES / recipe), "--set", f"data.source={typo}",
            "--set", f"output_dir={tmp_path / 'run'}"]  # fmt: skip
    assert_fast_error(argv, tmp_path, expected)


def test_sources_that_cannot_be_a_dataset(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "datasets"))
    embedded = ("genre", "reber", "reviews-es")
    with pytest.raises(FileNotFoundError, match=r"data\.source: no such file or folder"):
        check_source(str(tmp_path / "missing.csv"), embedded)
    with pytest.raises(ValueError, match=r"did you mean 'reviews-es'\?"):
        check_source("reviews_es", embedded, bare_hub_ids=True)
    with pytest.raises(ValueError, match=r"a Hub dataset id is owner/name"):
        check_source("imdb", embedded)  # a bare name where a task takes owner/name only
    with pytest.raises(ValueError, match=r"a Hub dataset id is owner/name"):
        check_source("me/a--b", embedded)
    (tmp_path / "mine.csv").write_text("text,label\n")
    for fine in ("genre", str(tmp_path / "mine.csv"), str(tmp_path), "me/corpus", "imdb"):
        check_source(fine, embedded, bare_hub_ids=True)  # online: Hub ids go to the Hub
    check_source("https://example.org/spa.zip", embedded, urls=True)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(ValueError, match=r"the Hub is offline .* it is not cached"):
        check_source("me/corpus", embedded)
    (tmp_path / "hub" / "datasets--me--corpus").mkdir(parents=True)
    check_source("me/corpus", embedded)  # downloaded before: it loads offline


HUB_DATASET = """
import os, sys
from huggingface_hub import HfApi
from hfattn.data.text import check_text_source, load_text_splits
HfApi().create_repo("me/corpus", repo_type="dataset")
HfApi().upload_file(path_or_fileobj=sys.argv[1], path_in_repo="train.txt", repo_id="me/corpus",
                    repo_type="dataset")
splits = load_text_splits("me/corpus", validation_fraction=0.1, test_fraction=0.1)
print(sum(len(text) for docs in splits.values() for text in docs))
os.environ["HF_DATASETS_OFFLINE"] = "1"
check_text_source("me/corpus")  # cached now: it loads offline too
try:
    check_text_source("me/other")
except ValueError as err:
    print(err)
"""


def test_hub_dataset_ids_keep_working(tmp_path):
    """A real Hub id passes the check and loads (a local Hub-compatible server)."""
    from tests.helpers.hub_server import HubServer

    corpus = tmp_path / "train.txt"
    corpus.write_text("To be, or not to be, that is the question.\n" * 50, encoding="utf-8")
    with HubServer(tmp_path / "hub") as server:
        result = subprocess.run(
            [sys.executable, "-c", HUB_DATASET, str(corpus)],
            env=clean_env(HF_ENDPOINT=server.url, HF_TOKEN="hf_test", HF_HOME=str(tmp_path)),
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert result.returncode == 0, result.stderr
    loaded, offline = result.stdout.strip().splitlines()
    assert int(loaded) == len(corpus.read_text()) - 1  # its lines, joined by newlines
    assert "'me/other' is not an embedded dataset" in offline and "the Hub is offline" in offline


# ---- 3. the progress bar of a time-bounded run, 4. other libraries' noise -------------------
def cli(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``hfattn ARGV`` in a fresh interpreter (it must succeed)."""
    result = subprocess.run(
        [sys.executable, "-m", "hfattn", *argv],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return result


TIED = {"type": "char-rnn", "cell": "gru", "embedding_dim": 32, "hidden_size": 32,
        "tie_word_embeddings": True}  # fmt: skip
"""Tied embeddings: accelerate removes the shared tensor from every checkpoint, and says so."""
NOISE = ("Removed shared tensor", "Writing model shards", "Loading weights")


@pytest.fixture(scope="module")
def clocked_run(tmp_path_factory) -> tuple[Path, str]:
    """A tiny tied char-RNN run that the clock stops long before its 100,000 steps, trained
    by the CLI with the default logging: ``(run folder, stderr)``."""
    folder = tmp_path_factory.mktemp("clocked")
    recipe = small_recipe(  # a small corpus: short final evaluations
        folder,
        model=TIED,
        training={
            "max_steps": 100_000,
            "epochs": 10_000,
            "max_minutes": 0.025,
            "log_every": 5,
            "eval_every": None,
            "save_every": 50,
        },  # fmt: skip
    )
    return folder / "run", cli(["train", str(recipe)], folder).stderr


def test_the_bar_of_a_time_bounded_run_follows_the_clock_to_100_percent(clocked_run):
    run, err = clocked_run
    training = json.loads((run / "eval_results.json").read_text())["training"]
    assert training["stop_reason"] == "time budget"
    assert 0 < training["global_step"] < training["schedule_steps"] // 10
    last = [part for part in err.replace("\r", "\n").splitlines() if part.startswith("train:")][-1]
    assert last.startswith("train: 100%|██████████|"), last
    assert f"step={training['global_step']}" in last  # the real step, next to the percentage
    # once the bar is closed, each final evaluation says what it scores before it starts
    after_bar = err.replace("\r", "\n").split(last, 1)[1].splitlines()
    said = [line for line in after_bar if "evaluating" in line]
    assert said == [
        f"INFO hfattn.training.finishing: evaluating the {split} split with the final weights..."
        for split in ("validation", "test")
    ], err[-2000:]


@pytest.mark.slow
def test_other_libraries_are_quiet_by_default_and_back_with_verbose(
    clocked_run, tmp_path, capfd, caplog
):
    """Quiet in a fresh interpreter (the libraries imported after the set-up read its
    environment: the clocked run) and in this one (they are imported already: set up through
    their own functions); ``-v`` brings their messages back. In this process hfattn's records
    reach pytest's log capture, not stderr."""
    from hfattn.cli import main
    from hfattn.commands.logging_setup import configure_logging, set_verbose

    run, err = clocked_run
    assert list((run / "checkpoints").glob("step-*"))  # checkpoints with a shared tensor
    assert not [noise for noise in NOISE if noise in err], err
    assert (
        "INFO hfattn.tokenization.characters: char tokenizer:" in err
    )  # hfattn's own messages stay

    assert main(["generate", str(run), "--prompt", "Zoë:\n", "--max-new-tokens", "5"]) == 0
    quiet = capfd.readouterr()
    assert quiet.out.startswith("Zoë:\n")
    assert "prompt characters not in the vocabulary" in caplog.text  # hfattn's warning
    said = quiet.err + caplog.text
    assert not [noise for noise in NOISE if noise in said], said

    recipe = small_recipe(
        tmp_path, model=TIED, training={"max_steps": 2, "eval_every": 2, "save_every": 2}
    )
    try:
        assert main(["train", str(recipe), "-v"]) == 0
        verbose = capfd.readouterr().err + caplog.text
    finally:  # the default set-up back for the next tests of this process
        set_verbose(False)
        configure_logging()
    assert "Removed shared tensor {'lm_head.weight'} while saving" in verbose
    assert "Writing model shards" in verbose
