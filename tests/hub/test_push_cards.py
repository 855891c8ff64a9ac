"""Publishing to a local Hub: the pushed repo loads without hfattn, and the card carries the
recorded results (or says they are not recorded), the citations, the continuous cache, a short
run's warning, and no secret of the recipe. Requests and refusals are in
``test_push_requests.py``, LoRA adapters and the push at the end of training in
``test_push_adapters_and_recipes.py``."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from huggingface_hub import ModelCard

from hfattn.cli import main as cli_main
from hfattn.hub import citations, inspect_folder, push_model_folder, render_model_card
from tests.conftest import TEST_TOKEN
from tests.helpers.fresh_env import LOAD_SCRIPT, clean_env, greedy_and_sampled
from tests.helpers.tiny_runs import PUBLISHED

pytestmark = pytest.mark.usefixtures("fast_retries")  # of conftest.py


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
