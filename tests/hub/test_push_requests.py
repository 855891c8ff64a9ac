"""Publishing to a local Hub: what a push sends (the token in the Authorization header only, a
private branch, a dry run's exact folder and tree, the Space beside the model) and how bad input
(no token, a bad repo id, no model folder, a broken folder), server failures (retried, then one
clear error that commits nothing) and an unreachable Hub are handled."""

from __future__ import annotations

import json
import logging
import shutil

import pytest
from huggingface_hub import SpaceCard

from hfattn.cli import main as cli_main
from hfattn.hub import HubPushError, push_model_folder
from hfattn.hub import push as push_module
from tests.conftest import TEST_TOKEN
from tests.helpers.network import connections, connects
from tests.helpers.space_helpers import SPACE_FILES
from tests.helpers.tiny_runs import PUBLISHED

pytestmark = pytest.mark.usefixtures("fast_retries")  # of conftest.py


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
