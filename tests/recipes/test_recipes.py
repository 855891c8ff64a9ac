"""Recipe validation: every bad field stops before training with a message naming it."""

import pytest
import yaml

from hfattn.cli import main
from hfattn.recipes import RecipeError, load_recipe
from tests.helpers.network import connections, connects
from tests.helpers.recipe_helpers import corpus_file, write_recipe


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("training.lr=1", "training.lr: not a field of training (batch_size, "),
        ("training.batch_size=abc", "training.batch_size: 'abc' is not an integer"),
        ("training.batch_size=-8", "training.batch_size: must be > 0, got -8"),
        (
            "training.optimizer=lbfgs",
            "training.optimizer: 'lbfgs' is not one of adamw, nadam, rmsprop, radam, sgd, muon",
        ),
        ("training.schedule=step", "training.schedule: 'step' is not one of"),
        ("model.cell=transformer", "model.cell must be one of gru, lstm, rnn"),
        ("model.hidden_size=-3", "model.hidden_size must be a positive integer, got -3"),
        ("model.heads=4", "model.heads: is not a field of CharRNNConfig"),
        ("model.type=unknown-model", "model.type: unknown model type 'unknown-model'"),
        ("hub.push_to_hub=true", "hub.repo_id: is required when hub.push_to_hub is true"),
        (
            "evaluation.splits=[dev]",
            "evaluation.splits: 'dev' is not one of train, validation, test",
        ),
    ],
)
def test_bad_fields_are_named(tmp_path, override, message):
    recipe = write_recipe(tmp_path)
    with pytest.raises(RecipeError) as err:
        load_recipe(recipe, [override])
    assert message in str(err.value)


def test_shipped_recipe_is_valid_and_overridable():
    recipe = load_recipe("recipes/char_rnn_shakespeare.yaml", ["training.max_minutes=2"])
    assert recipe.training.max_minutes == 2.0
    assert recipe.output_dir == "runs/char_rnn_shakespeare"
    assert recipe.model["type"] == "char-rnn"


def test_a_recipe_read_after_another_gets_the_defaults_again(tmp_path):
    """The sections' schemas are built once per class and copied by every read: what one
    recipe or ``--set`` gives a field (a list included) is not the next recipe's default."""
    recipe = write_recipe(tmp_path, evaluation={"splits": ["test"]})
    first = load_recipe(recipe, ["training.max_minutes=2", "training.warmup_steps=3"])
    plain = tmp_path / "plain.yaml"  # no training: or evaluation: section
    plain.write_text(yaml.safe_dump({"data": {"source": str(corpus_file(tmp_path))}}))
    again = load_recipe(plain)
    assert (first.training.max_minutes, first.training.warmup_steps) == (2.0, 3)
    assert first.evaluation.splits == ["test"]
    assert (again.training.max_minutes, again.training.warmup_steps) == (None, 0)
    assert again.evaluation.splits == ["validation", "test"]


def test_the_model_config_is_built_once_when_the_recipe_loads(tmp_path):
    """``load_recipe`` builds the config of ``model:``; the job builds its model from a copy
    of it sized to the tokenizer; ``recipe.yaml`` does not hold it."""
    from hfattn.tasks import get_task

    recipe = load_recipe(write_recipe(tmp_path), ["model.hidden_size=24"])
    config = recipe.model_config
    assert type(config).__name__ == "CharRNNConfig" and config.hidden_size == 24
    assert "model_config" not in yaml.safe_load(recipe.to_yaml())
    placeholder = config.vocab_size
    job = get_task(recipe.task).build_job(recipe)
    assert job.model.config.hidden_size == 24
    assert job.model.config.vocab_size == len(job.tokenizer) != placeholder
    assert recipe.model_config is config and config.vocab_size == placeholder


def test_cli_reports_bad_input_before_training(tmp_path, capsys):
    recipe = write_recipe(tmp_path)
    assert main(["train", str(recipe), "--set", "model.cell=gruu"]) == 2
    assert "model.cell must be one of gru, lstm, rnn" in capsys.readouterr().err
    assert main(["train", str(tmp_path / "nope.yaml")]) == 2
    assert "recipe file not found" in capsys.readouterr().err
    missing = write_recipe(
        tmp_path, filename="missing.yaml", data={"source": str(tmp_path / "gone.txt")}
    )
    assert main(["train", str(missing)]) == 2
    assert "data.source: no such file" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()  # nothing was trained or written


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["training.max_steps"], "--set training.max_steps: expected KEY=VALUE"),
        (["training.max_steps="], "--set training.max_steps=: expected KEY=VALUE"),
        (["=5"], "--set =5: expected KEY=VALUE"),
        (["model.use_cache=maybe"], "model.use_cache: 'maybe' is not true or false"),
        (["model.hidden_size=2.5"], "model.hidden_size: 2.5 is not an integer"),
        (["training.betas=[0.9,1.5]"], "training.betas: each must be in [0, 1), got [0.9, 1.5]"),
    ],
)
def test_silent_values_are_refused(tmp_path, overrides, message):
    recipe = write_recipe(tmp_path)
    with pytest.raises(RecipeError) as err:
        load_recipe(recipe, overrides)
    assert message in str(err.value)
    assert load_recipe(recipe, ["training.max_steps=null"]).training.max_steps is None


def test_mixed_precision_no_is_read_as_written(tmp_path):
    # YAML 1.1 parses a bare `no` as false; the recipe must still mean "no", not fail.
    recipe = write_recipe(tmp_path)
    text = recipe.read_text()
    assert "training:\n  mode: stateful\n" in text
    recipe.write_text(text.replace("training:\n", "training:\n  mixed_precision: no\n"))
    assert load_recipe(recipe).training.mixed_precision == "no"
    for value, expected in (("no", "no"), ("bf16", "bf16")):
        given = load_recipe(recipe, [f"training.mixed_precision={value}"])
        assert given.training.mixed_precision == expected
    with pytest.raises(RecipeError, match="training.mixed_precision: 'True' is not one of"):
        load_recipe(recipe, ["training.mixed_precision=yes"])


def test_generate_uses_the_saved_generation_defaults(char_rnn_run, capsys):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from hfattn.tasks.causal_lm.inference import generate_text

    model = AutoModelForCausalLM.from_pretrained(char_rnn_run)
    saved = model.generation_config  # the tiny recipe: 40 new tokens at temperature 0.8
    assert (saved.max_new_tokens, saved.temperature, saved.do_sample) == (40, 0.8, True)
    tokenizer = AutoTokenizer.from_pretrained(char_rnn_run)
    want = generate_text(
        model, tokenizer, "ROMEO:", seed=0, max_new_tokens=40, do_sample=True, temperature=0.8
    )
    assert main(["generate", str(char_rnn_run), "--prompt", "ROMEO:", "--seed", "0"]) == 0
    assert capsys.readouterr().out.rstrip("\n") == want  # --seed 0: a fresh seed by default
    assert main(["generate", str(char_rnn_run), "--prompt", "R", "--max-new-tokens", "5"]) == 0
    assert len(capsys.readouterr().out.rstrip("\n")) <= 1 + 5
    assert main(["generate", str(char_rnn_run), "--top-k", "-5"]) == 2
    assert "--top-k must be >= 0 (0 = off), got -5" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"name: x\ntraining: [1, 2\n", "line 3, column 1: not valid YAML"),
        (b"- a\n- b\n", "a recipe is a mapping of sections (name, task, model, ...), got a list"),
        (b"name: \xff\xfe\n", "not UTF-8 text (byte 6)"),
    ],
)
def test_unreadable_recipe_files_give_one_message(tmp_path, capsys, content, message):
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    assert main(["train", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_commands_name_a_missing_or_broken_model_folder(char_rnn_run, tmp_path, capsys):
    import shutil

    with connections() as attempts:
        assert main(["generate", "./runs/no-such-run", "--prompt", "x"]) == 2
    assert "model folder not found: ./runs/no-such-run" in capsys.readouterr().err
    assert attempts == []  # a path: no Hub look-up, no retries
    broken = tmp_path / "broken"
    shutil.copytree(char_rnn_run, broken)
    data = (broken / "model.safetensors").read_bytes()
    (broken / "model.safetensors").write_bytes(data[:1000])
    for argv in (["generate", str(broken)], ["evaluate", str(broken)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert f"cannot load the model in '{broken}'" in err and "Traceback" not in err
    (broken / "config.json").write_text("{garbage")
    assert main(["generate", str(broken)]) == 2
    assert "config.json' is not a valid JSON file" in capsys.readouterr().err


def test_model_shorthand_names_a_pretrained_checkpoint_in_yaml_and_in_set():
    """``model: <id>`` and ``--set model=<id>`` both become ``{pretrained: <id>}``, replacing
    the task's default ``type`` instead of merging into it."""
    from hfattn.recipes import load_recipe

    assert load_recipe("recipes/minilm_genre.yaml").model == {
        "pretrained": "sentence-transformers/all-MiniLM-L6-v2"
    }
    overridden = load_recipe("recipes/minilm_genre.yaml", ["model=/some/folder"])
    assert overridden.model == {"pretrained": "/some/folder"}


@pytest.mark.parametrize("hub", ["refusing", "silent"])
def test_unreachable_hub_is_a_quick_model_pretrained_error(monkeypatch, hub):
    """Without ``HF_HUB_OFFLINE``, a Hub that refuses connections or never answers fails the
    model id in one short request (one connection, a short timeout), not after
    ``huggingface_hub``'s ~30 s of retries."""
    import socket
    import time

    import huggingface_hub.constants as hub_constants
    import huggingface_hub.file_download  # noqa: F401  (imported before the clock starts)
    from huggingface_hub.utils import build_hf_headers

    import hfattn.tasks.pretrained as pretrained
    from hfattn.tasks.pretrained import resolve_pretrained

    timeout = 0.5  # the probe's timeout, shortened: the silent Hub is waited for once, so long
    monkeypatch.setattr(pretrained, "HUB_PROBE_TIMEOUT_S", timeout)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    if hub == "silent":
        server.listen(1)  # the kernel accepts the connection; nobody ever answers
    address = server.getsockname()
    endpoint = f"http://127.0.0.1:{address[1]}"
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub_constants, "ENDPOINT", endpoint)
    monkeypatch.setattr(
        hub_constants,
        "HUGGINGFACE_CO_URL_TEMPLATE",
        endpoint + "/{repo_id}/resolve/{revision}/{filename}",
    )
    build_hf_headers()  # the library's one agent-registry request of a process: made here
    try:
        start = time.perf_counter()
        with (
            connections() as attempts,
            pytest.raises(
                RecipeError,
                match=r"^model\.pretrained: 'nobody-here/no-such-model' is neither a local model "
                r"folder \(with config\.json\) nor reachable on the Hub \(",
            ),
        ):
            resolve_pretrained("nobody-here/no-such-model")
        elapsed = time.perf_counter() - start
    finally:
        server.close()
    assert connects(attempts) == [address]  # one request, no retries
    if hub == "silent":
        assert elapsed >= timeout * 0.9  # it did wait for the answer, once
