"""Publishing to a local Hub: the pushed repo loads without hfattn, the card carries the
recorded results, and bad input / server failures / secrets are handled."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from huggingface_hub import ModelCard, SpaceCard

from hfattn.cli import main as cli_main
from hfattn.hub import HubPushError, citations, inspect_folder, push_model_folder, render_model_card
from hfattn.hub import push as push_module
from tests.conftest import TEST_TOKEN
from tests.helpers.fresh_env import LOAD_SCRIPT, clean_env, greedy_and_sampled
from tests.helpers.network import connections, connects
from tests.helpers.space_helpers import SPACE_FILES
from tests.helpers.tiny_runs import PUBLISHED


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch):
    """Keep the backoff short in tests (the policy itself is unchanged)."""
    monkeypatch.setattr(push_module, "RETRY_BASE_DELAY_S", 0.01)


def _expected_generations(folder: Path) -> dict[str, str]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    return greedy_and_sampled(model, AutoTokenizer.from_pretrained(folder))


def _copy_run(run: Path, dest: Path, *, results: bool = True) -> Path:
    shutil.copytree(run, dest)
    if not results:
        (dest / "eval_results.json").unlink()
    return dest


@pytest.mark.slow
def test_push_then_load_without_hfattn(hub_server, char_rnn_run, fresh_python, tmp_path):
    expected = _expected_generations(char_rnn_run)
    start = time.perf_counter()
    url = push_model_folder(char_rnn_run, "tester/char-rnn-tiny")
    assert url == f"{hub_server.url}/tester/char-rnn-tiny"
    assert set(hub_server.files("tester/char-rnn-tiny")) == PUBLISHED  # no checkpoints/ or logs
    assert len(hub_server.repo("tester/char-rnn-tiny").commits) == 1

    env = clean_env(HF_HOME=str(tmp_path / "fresh_hf_home"))  # nothing cached
    result = subprocess.run(
        [str(fresh_python), "-c", LOAD_SCRIPT, "tester/char-rnn-tiny"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    elapsed = time.perf_counter() - start
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert loaded["module"].startswith("transformers_modules")  # the repo's own modeling code
    assert loaded["greedy"] == expected["greedy"]
    assert loaded["sampled"] == expected["sampled"]
    assert len(loaded["greedy"]) > len("ROMEO:")
    print(f"push + fresh-env load round trip: {elapsed:.2f}s")

    readme = hub_server.revision_dir("tester/char-rnn-tiny") / "README.md"
    card = ModelCard.load(readme)
    recorded = json.loads((char_rnn_run / "eval_results.json").read_text())
    got = [
        (
            r.task_type,
            r.dataset_type,
            r.dataset_name,
            r.dataset_split,
            r.metric_type,
            r.metric_name,
            r.metric_value,
        )
        for r in card.data.eval_results
    ]
    want = [
        (
            recorded["task_type"],
            recorded["dataset_type"],
            recorded["dataset_name"],
            r["split"],
            r["metric_type"],
            r["metric_name"],
            r["value"],
        )
        for r in recorded["results"]
    ]
    assert got == want
    assert card.data.library_name == "transformers"
    assert card.data.pipeline_tag == "text-generation"
    assert card.data.license == "mit"
    assert card.data.language == ["en"]
    assert card.data.tags == ["hfattn", "char-rnn", "shakespeare", "tiny"]
    config = json.loads((char_rnn_run / "config.json").read_text())
    assert f"| `hidden_size` | `{config['hidden_size']}` |" in card.text
    perplexity = next(r for r in recorded["results"] if r["metric_type"] == "perplexity")
    assert f"| Perplexity | {perplexity['value']:.4g} |" in card.text
    assert "trust_remote_code=True" in card.text and "import hfattn" in card.text
    assert f"| Hardware | {recorded['training']['hardware']} |" in card.text
    assert "karpathy2015unreasonable" in card.text and "cho2014gru" in card.text
    assert "hochreiter1997lstm" not in card.text  # a GRU model does not cite the LSTM paper
    assert "![Training and validation loss](loss_curve.png)" in card.text
    assert TEST_TOKEN not in readme.read_text()


def test_each_citation_prints_its_entry_of_citations_bib(tmp_path):
    cited = [c for c in vars(citations).values() if isinstance(c, citations.Citation)]
    assert sorted(c.key for c in cited) == sorted(citations.BIBTEX)  # no entry left uncited
    for citation in cited:
        head, _ = citation.bibtex.split("\n", 1)
        assert head.startswith("@") and head.endswith(f"{{{citation.key},"), head
        assert citation.bibtex.endswith("\n}")
    path = tmp_path / "two.bib"
    path.write_text("@misc{a,\n  year = {2015}\n}\n\n\n@article{b,\n  title = {x}\n}\n")
    assert citations.read_bibtex(path) == {
        "a": "@misc{a,\n  year = {2015}\n}",
        "b": "@article{b,\n  title = {x}\n}",
    }


def test_card_names_the_continuous_cache_and_cites_it(char_rnn_run, tmp_path):
    folder = _copy_run(char_rnn_run, tmp_path / "run")
    plain = render_model_card(inspect_folder(folder), "tester/plain").text
    assert "| Attention |" not in plain and "grave2017improving" not in plain
    config = json.loads((folder / "config.json").read_text())
    config.update(neural_cache_size=4000, neural_cache_theta=0.1, neural_cache_lambda=0.16)
    (folder / "config.json").write_text(json.dumps(config))
    card = render_model_card(inspect_folder(folder), "tester/cache").text
    assert (
        "| Attention | continuous cache over the last 4,000 positions (Grave et al. 2017), "
        "θ = 0.1, λ = 0.16 |" in card
    )
    assert citations.GRAVE_2017.bibtex in card


def test_card_without_recorded_results(char_rnn_run, tmp_path):
    folder = inspect_folder(_copy_run(char_rnn_run, tmp_path / "run", results=False))
    card = render_model_card(folder, "tester/no-results")
    assert card.data.eval_results is None
    assert "model-index" not in str(card)
    assert "Results are not recorded for this model" in card.text
    assert "| Recipe | char_rnn_tiny_test |" in card.text  # the recipe still describes training
    reloaded = ModelCard(str(card))
    assert reloaded.data.pipeline_tag == "text-generation"

    recorded = json.loads((char_rnn_run / "eval_results.json").read_text())
    (folder.path / "eval_results.json").write_text(json.dumps({**recorded, "results": []}))
    no_splits = render_model_card(inspect_folder(folder.path), "tester/no-splits")
    assert no_splits.data.eval_results is None  # evaluated on no split: no model-index
    assert (
        "Results are not recorded" in no_splits.text
        and f"| Hardware | {recorded['training']['hardware']} |" in no_splits.text
    )

    (folder.path / "eval_results.json").unlink()
    (folder.path / "recipe.yaml").unlink()  # a bare save_pretrained folder: defaults apply
    bare = render_model_card(inspect_folder(folder.path), "tester/bare")
    assert "Training details were not recorded" in bare.text
    assert bare.data.license is None and bare.data.tags == ["hfattn", "char-rnn"]
    assert "| License | not set (the license of the training data is unknown) |" in bare.text


def test_no_token_fails_before_any_work(hub_server, char_rnn_run, monkeypatch):
    monkeypatch.delenv("HF_TOKEN")
    with pytest.raises(HubPushError, match="no Hugging Face token: set HF_TOKEN"):
        push_model_folder(char_rnn_run, "tester/no-token")
    assert hub_server.requests == []


@pytest.mark.parametrize(
    "repo_id", ["no-slash", "a/b/c", "-bad/name", "me/na--me", "me/", "/name", "me/na me"]
)
def test_bad_repo_id_is_refused(hub_server, char_rnn_run, repo_id):
    with pytest.raises(HubPushError, match="repo_id must be 'owner/name'"):
        push_model_folder(char_rnn_run, repo_id)
    assert hub_server.requests == []


def test_not_a_model_folder(hub_server, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(HubPushError, match="config.json missing"):
        push_model_folder(tmp_path / "empty", "tester/x")
    assert hub_server.requests == []


def test_server_errors_are_retried_then_succeed(hub_server, char_rnn_run, caplog):
    hub_server.fail(r"POST /api/models/.*/commit/", status=503, times=2, echo_auth=True)
    hub_server.fail(r"POST /api/repos/create", status=None, times=1)  # connection dropped
    with caplog.at_level(logging.WARNING):
        push_model_folder(char_rnn_run, "tester/flaky")
    commits = [r for r in hub_server.requests if "/commit/" in r.path]
    assert len(commits) == 3
    assert len(hub_server.repo("tester/flaky").commits) == 1
    assert set(hub_server.files("tester/flaky")) == PUBLISHED
    assert "retrying" in caplog.text and "HTTP 503" in caplog.text
    assert TEST_TOKEN not in caplog.text
    assert "hf_***" in caplog.text  # the echoed Authorization header was scrubbed


def test_retries_exhausted_fail_clearly_and_commit_nothing(hub_server, char_rnn_run, caplog):
    hub_server.fail(r"POST /api/models/.*/commit/", status=500, times=100, echo_auth=True)
    with caplog.at_level(logging.DEBUG), pytest.raises(HubPushError) as info:
        push_model_folder(char_rnn_run, "tester/down")
    message = str(info.value)
    assert f"failed after {push_module.RETRY_ATTEMPTS} attempts" in message
    assert "HTTP 500" in message and "nothing was committed" in message
    assert TEST_TOKEN not in message and TEST_TOKEN not in caplog.text
    assert info.value.__cause__ is None and info.value.__context__ is None  # no leaky chain
    assert hub_server.repo("tester/down").commits == []
    assert hub_server.files("tester/down") == []


def test_timeouts_exhausted(hub_server, char_rnn_run):
    hub_server.fail(r"POST /api/models/.*/commit/", status=None, times=100)
    with pytest.raises(HubPushError, match="failed after 4 attempts"):
        push_model_folder(char_rnn_run, "tester/timeout")
    assert hub_server.files("tester/timeout") == []


def test_client_errors_are_not_retried(hub_server, char_rnn_run):
    hub_server.fail(r"POST /api/models/.*/commit/", status=403, times=100)
    with pytest.raises(HubPushError, match="refused the token"):
        push_model_folder(char_rnn_run, "tester/forbidden")
    assert len([r for r in hub_server.requests if "/commit/" in r.path]) == 1


def test_token_in_recipe_is_scrubbed_from_card(hub_server, char_rnn_run, tmp_path):
    run = _copy_run(char_rnn_run, tmp_path / "run")
    recipe = (
        (run / "recipe.yaml")
        .read_text()
        .replace("repo_id: null", f"repo_id: null\n  note: {TEST_TOKEN}")
    )
    (run / "recipe.yaml").write_text(recipe)
    push_model_folder(run, "tester/leaky")
    base = hub_server.revision_dir("tester/leaky")
    for name in hub_server.files("tester/leaky"):
        assert TEST_TOKEN.encode() not in (base / name).read_bytes(), name
    assert "hf_***" in (base / "README.md").read_text()


def test_auth_header_and_private_branch(hub_server, char_rnn_run):
    push_model_folder(char_rnn_run, "tester/priv", private=True, revision="dev")
    assert hub_server.repo("tester/priv").private
    assert set(hub_server.files("tester/priv", "dev")) == PUBLISHED
    assert hub_server.files("tester/priv", "main") == []
    writes = [r for r in hub_server.requests if r.method == "POST" and r.path.startswith("/api/")]
    assert writes and all(r.authorization == f"Bearer {TEST_TOKEN}" for r in writes)


def test_dry_run_writes_exact_folder_and_tree(
    hub_server, char_rnn_run, tmp_path, capsys, monkeypatch
):
    monkeypatch.delenv("HF_TOKEN")  # a dry run needs no token
    out = tmp_path / "dry"
    push_model_folder(char_rnn_run, "tester/dry", space=True, dry_run_dir=out)
    assert hub_server.requests == []
    assert {p.name for p in (out / "model").iterdir()} == PUBLISHED
    assert {p.name for p in (out / "space").iterdir()} == SPACE_FILES
    printed = capsys.readouterr().out
    for name in ("model", "space", "model.safetensors", "app.py", "README.md"):
        assert name in printed
    assert "left out: checkpoints/ (training checkpoints)" in printed
    assert "left out: metrics.jsonl (training log)" in printed
    with pytest.raises(FileExistsError, match="not empty"):
        push_model_folder(char_rnn_run, "tester/dry", dry_run_dir=out)
    # the preview shares no file with the model: editing it leaves the model as it was
    for name in ("model.safetensors", "config.json", "tokenizer.json"):
        assert (out / "model" / name).stat().st_ino != (char_rnn_run / name).stat().st_ino
    before = (char_rnn_run / "config.json").read_bytes()
    (out / "model" / "config.json").write_text("{}")
    assert (char_rnn_run / "config.json").read_bytes() == before


def test_cli_push_with_space(hub_server, char_rnn_run, capsys):
    assert cli_main(["push", str(char_rnn_run), "--repo-id", "tester/cli", "--space"]) == 0
    lines = capsys.readouterr().out.split()
    assert lines == [f"{hub_server.url}/tester/cli", f"{hub_server.url}/spaces/tester/cli"]
    assert hub_server.repo("tester/cli", "space").sdk == "gradio"
    assert set(hub_server.files("tester/cli", repo_type="space")) == SPACE_FILES
    space_card = SpaceCard.load(
        hub_server.revision_dir("tester/cli", repo_type="space") / "README.md"
    )
    assert space_card.data.sdk == "gradio" and space_card.data.app_file == "app.py"
    assert space_card.data.models == ["tester/cli"]
    requirements = (
        hub_server.revision_dir("tester/cli", repo_type="space") / "requirements.txt"
    ).read_text()
    assert "transformers" in requirements and "hfattn" not in requirements
    assert cli_main(["push", str(char_rnn_run), "--repo-id", "bad id"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: repo_id must be 'owner/name'") and err.count("\n") == 1


def test_an_unreachable_hub_fails_at_once(char_rnn_run, monkeypatch, capsys, caplog):
    """No network (nothing listens at HF_ENDPOINT): one line, no retries (once 4 tries and 14 s
    of backoff). The backoff is the real one here."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        address = probe.getsockname()
        endpoint = f"http://127.0.0.1:{address[1]}"  # closed once the block ends
    monkeypatch.setattr(push_module, "RETRY_BASE_DELAY_S", 2.0)
    monkeypatch.setenv("HF_ENDPOINT", endpoint)
    monkeypatch.setenv("HF_TOKEN", TEST_TOKEN)
    with connections() as attempts, caplog.at_level(logging.WARNING):
        assert cli_main(["push", str(char_rnn_run), "--repo-id", "tester/offline"]) == 2
    # one try: no retries (they would wait 2 + 4 + 8 s)
    assert connects(attempts).count(address) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        f"error: creating model repo tester/offline failed: cannot reach the Hub at {endpoint} "
        "(ConnectError: "
    )
    assert err.rstrip().endswith("check the network connection and HF_ENDPOINT")
    assert err.count("\n") == 1 and "retrying" not in caplog.text


# ------------------------------------------------------------------------- LoRA adapters
@pytest.fixture
def lora_run(tmp_path) -> tuple[Path, Path]:
    """A tiny GPT-2 base folder and a LoRA adapter run folder trained on top of it."""
    peft = pytest.importorskip("peft", reason="peft is not installed: LoRA publishing is untested")
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from hfattn.tokenization.characters import build_char_tokenizer

    torch.manual_seed(0)
    tokenizer = build_char_tokenizer("abcdefghijklmnopqrstuvwxyz ROMEO:")
    base = GPT2LMHeadModel(
        GPT2Config(
            n_layer=1,
            n_embd=16,
            n_head=2,
            vocab_size=len(tokenizer),
            n_positions=64,
            bos_token_id=2,
            eos_token_id=3,
        )
    )
    base.save_pretrained(tmp_path / "base")
    tokenizer.save_pretrained(tmp_path / "base")
    config = peft.LoraConfig(
        task_type="CAUSAL_LM", r=2, lora_alpha=4, target_modules=["c_attn"], fan_in_fan_out=True
    )
    model = peft.get_peft_model(GPT2LMHeadModel.from_pretrained(tmp_path / "base"), config)
    for name, param in model.named_parameters():
        if "lora_B" in name:  # as if trained: B starts at zero, which would make merging a no-op
            torch.nn.init.normal_(param, std=0.5)
    run = tmp_path / "lora_run"
    model.save_pretrained(run)
    tokenizer.save_pretrained(run)
    (run / "recipe.yaml").write_text(
        "name: lora_test\nhub:\n  base_model: openai-community/gpt2\n  license: mit\n"
    )
    return tmp_path / "base", run


def test_lora_adapter_is_pushed_as_adapter(hub_server, lora_run):
    _, run = lora_run
    push_model_folder(run, "tester/lora")
    files = set(hub_server.files("tester/lora"))
    assert {
        "adapter_config.json",
        "adapter_model.safetensors",
        "README.md",
        "tokenizer.json",
    } <= files
    assert "model.safetensors" not in files
    base = hub_server.revision_dir("tester/lora")
    card = ModelCard.load(base / "README.md")
    assert card.data.base_model == "openai-community/gpt2"
    assert card.data.library_name == "peft"
    assert "lora" in card.data.tags and "PeftModel.from_pretrained" in card.text
    adapter_config = json.loads((base / "adapter_config.json").read_text())
    assert adapter_config["base_model_name_or_path"] == "openai-community/gpt2"


def test_lora_merge_publishes_the_merged_model(lora_run, tmp_path, monkeypatch):
    import peft
    import torch
    from transformers import AutoModelForCausalLM

    monkeypatch.delenv("HF_TOKEN", raising=False)
    base_dir, run = lora_run
    push_model_folder(run, "tester/lora-merged", merge=True, dry_run_dir=tmp_path / "dry")
    staged = tmp_path / "dry" / "model"
    names = {p.name for p in staged.iterdir()}
    assert {"config.json", "model.safetensors", "README.md", "tokenizer.json"} <= names
    assert not names & {"adapter_config.json", "adapter_model.safetensors"}
    merged = AutoModelForCausalLM.from_pretrained(staged).eval()
    reference = peft.PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(base_dir), run
    ).eval()
    ids = torch.tensor([[4, 5, 6, 7, 8]])
    with torch.no_grad():
        torch.testing.assert_close(merged(ids).logits, reference(ids).logits, atol=1e-5, rtol=1e-5)
        plain = AutoModelForCausalLM.from_pretrained(base_dir)(ids).logits
    assert not torch.allclose(merged(ids).logits, plain, atol=1e-3)  # the adapter changed it
    card = ModelCard.load(staged / "README.md")
    assert card.data.base_model == "openai-community/gpt2"
    assert card.data.library_name == "transformers" and "lora-merged" in card.data.tags
    assert "trust_remote_code" not in card.text  # GPT-2 is built into transformers


def test_merge_refused_for_full_model(char_rnn_run, tmp_path):
    with pytest.raises(HubPushError, match="--merge applies to LoRA adapter folders"):
        push_model_folder(char_rnn_run, "tester/x", merge=True, dry_run_dir=tmp_path / "d")


# --------------------------------------------------------------- push at the end of training
def test_recipe_push_to_hub_publishes_the_finished_run(hub_server, tmp_path):
    from hfattn.orchestration.run import run_recipe
    from hfattn.recipes import load_recipe
    from tests.helpers.recipe_helpers import write_recipe

    recipe = write_recipe(
        tmp_path,
        training={"max_steps": 4, "eval_every": 4},
        evaluation={"splits": ["test"]},
        hub={
            "push_to_hub": True,
            "repo_id": "tester/from-recipe",
            "tags": ["tiny"],
            "license": "mit",
        },
    )
    run_recipe(load_recipe(recipe))
    files = set(hub_server.files("tester/from-recipe"))
    assert {"model.safetensors", "config.json", "modeling_char_rnn.py", "README.md"} <= files
    assert not any(f.startswith("checkpoints/") for f in files)
    card = ModelCard.load(hub_server.revision_dir("tester/from-recipe") / "README.md")
    recorded = json.loads((tmp_path / "run" / "eval_results.json").read_text())
    assert [r.metric_value for r in card.data.eval_results] == [
        r["value"] for r in recorded["results"]
    ]
    assert "tiny" in card.data.tags


def test_a_short_run_pushed_with_force_says_so_atop_its_results(
    hub_server, char_rnn_run, tmp_path, capsys
):
    from tests.helpers.recipe_helpers import write_recipe

    recipe = write_recipe(
        tmp_path,
        training={"max_steps": 20, "eval_every": 20, "save_every": 100},
        evaluation={"splits": ["test"]},
        hub={"license": "mit"},
    )
    run = tmp_path / "short"
    args = ["--set", f"output_dir={run}", "--set", "training.max_steps=3"]
    assert cli_main(["train", str(recipe), *args]) == 0
    push = ["push", str(run), "--repo-id", "tester/short"]
    assert cli_main(push) == 2
    assert "--force" in capsys.readouterr().err and hub_server.requests == []
    assert cli_main([*push, "--force"]) == 0
    card = ModelCard.load(hub_server.revision_dir("tester/short") / "README.md")
    warning = (
        "> **Warning: a short run.** Training stopped at step 3 of the 20 its recipe plans "
        "(15%): its scores and samples are those of an undertrained model."
    )
    results = card.text.split("\n## Results\n", 1)[1]
    assert results.lstrip().startswith(warning)
    assert results.index(warning) < results.index("| Split | Metric | Value |")
    full = render_model_card(inspect_folder(char_rnn_run), "tester/full").text
    assert "Warning: a short run" not in full  # a run that did its plan has none


@pytest.mark.parametrize("damage", ["truncated", "nan_weights", "nan_result"])
def test_broken_folders_are_never_uploaded(hub_server, char_rnn_run, tmp_path, capsys, damage):
    import torch
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "run"
    shutil.copytree(char_rnn_run, folder)
    weights_file = folder / "model.safetensors"
    if damage == "truncated":
        data = weights_file.read_bytes()
        weights_file.write_bytes(data[: len(data) // 2])
        expected = "model.safetensors: not a readable safetensors file"
    elif damage == "nan_weights":
        tensors = load_file(str(weights_file))
        name = sorted(tensors)[0]
        tensors[name] = torch.full_like(tensors[name], float("nan"))
        save_file(tensors, str(weights_file))
        expected = f"tensor {name!r} holds NaN or infinite values"
    else:
        results = json.loads((folder / "eval_results.json").read_text())
        results["results"][0]["value"] = float("nan")
        (folder / "eval_results.json").write_text(json.dumps(results))
        expected = "results[0].value is nan"
    assert cli_main(["push", str(folder), "--repo-id", "tester/broken"]) == 2
    assert expected in capsys.readouterr().err
    assert hub_server.requests == []  # refused before any upload


def test_a_merged_push_over_the_adapter_leaves_no_adapter_file(hub_server, lora_run, caplog):
    """The adapter pushed first, then the merged model to the same repository: the one commit
    of the second push deletes the adapter's files, so ``from_pretrained`` of the repository
    loads the merged model and nothing stale."""
    from transformers import AutoModelForCausalLM

    _, run = lora_run
    push_model_folder(run, "tester/lora-then-merged")
    assert "adapter_config.json" in hub_server.files("tester/lora-then-merged")
    with caplog.at_level(logging.INFO, logger="hfattn.hub.push"):
        push_model_folder(run, "tester/lora-then-merged", merge=True)
    files = set(hub_server.files("tester/lora-then-merged"))
    assert not files & {"adapter_config.json", "adapter_model.safetensors"}
    assert {"config.json", "model.safetensors", "README.md"} <= files
    assert len(hub_server.repo("tester/lora-then-merged").commits) == 2
    assert "adapter_config.json, adapter_model.safetensors" in caplog.text
    loaded = AutoModelForCausalLM.from_pretrained(
        hub_server.revision_dir("tester/lora-then-merged")
    )
    assert type(loaded).__name__ == "GPT2LMHeadModel"
