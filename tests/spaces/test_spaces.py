"""The Gradio Space apps: launched locally, called through gradio_client, driven in a real
headless Chromium, and run from the Hub in an environment without hfattn."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from hfattn.cli import main as cli_main
from hfattn.hub import inspect_folder, load_space_app, push_model_folder, stage_space
from tests.helpers.browser import CHROMIUM, CHROMIUM_ARGS
from tests.helpers.space_helpers import launch_space, load_space_frame, model_calls

MAX_INPUT_CHARS = 200
NEW_TOKENS = 30


def expected_text(folder: Path, prompt: str, n: int = NEW_TOKENS) -> str:
    """``prompt`` + the model's greedy continuation, as the Space shows it."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False).input_ids
    out = model.generate(ids, max_new_tokens=n, do_sample=False)
    return prompt + tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)


@pytest.fixture(scope="module")
def space_app(char_rnn_run, tmp_path_factory):
    """The text-generation Space staged for the tiny char-RNN run and launched in-process
    (inputs capped at :data:`MAX_INPUT_CHARS`); yields its local URL."""
    space = launch_space(
        char_rnn_run, tmp_path_factory.mktemp("space"), max_input_chars=MAX_INPUT_CHARS
    )
    try:
        yield space.url
    finally:
        space.close()


def test_text_generation_via_gradio_client(space_app, char_rnn_run):
    client = Client(space_app, verbose=False)
    want = expected_text(char_rnn_run, "ROMEO:")
    assert client.predict("ROMEO:", 0.0, 50, 0.95, NEW_TOKENS, api_name="/generate") == want

    job = client.submit("JULIET:", 0.0, 50, 0.95, NEW_TOKENS, api_name="/generate")
    final = job.result(timeout=60)
    updates = job.outputs()
    assert final == expected_text(char_rnn_run, "JULIET:")
    assert len(updates) > 1  # streamed, not returned in one piece
    assert all(final.startswith(u) for u in updates)

    sampled = client.predict("ROMEO:", 1.0, 10, 0.9, NEW_TOKENS, api_name="/generate")
    assert sampled.startswith("ROMEO:") and len(sampled) > len("ROMEO:")
    assert client.predict("", 0.0, 50, 0.95, 5, api_name="/generate")  # empty prompt: from <bos>


def test_space_refuses_over_long_and_out_of_range_input(space_app):
    client = Client(space_app, verbose=False)
    with (
        model_calls() as calls,
        pytest.raises(
            AppError,
            match=f"Prompt is {MAX_INPUT_CHARS + 1} characters long; this Space accepts at most {MAX_INPUT_CHARS}",
        ),
    ):
        client.predict("x" * (MAX_INPUT_CHARS + 1), 0.0, 50, 0.95, 10, api_name="/generate")
    assert calls == []  # refused at once, not after generating
    with pytest.raises(AppError, match="New tokens must be between 1 and 500, got 100000"):
        client.predict("ROMEO:", 0.0, 50, 0.95, 100_000, api_name="/generate")


def test_a_refused_input_logs_no_traceback(space_app, capfd):
    """The client gets one line for a 10k-character prompt and for an out-of-range slider
    value; the server log stays clean (once it printed the full traceback of each refusal)."""
    client = Client(space_app, verbose=False)
    for value, refusal in (
        ("x" * 10_000, "Prompt is 10000 characters long"),
        (-1, "New tokens must be between 1 and 500, got -1"),  # gradio's own check, once
        (501, "New tokens must be between 1 and 500, got 501"),
    ):
        capfd.readouterr()
        prompt, new_tokens = (value, 10) if isinstance(value, str) else ("ROMEO:", value)
        with pytest.raises(AppError, match=refusal):
            client.predict(prompt, 0.0, 50, 0.95, new_tokens, api_name="/generate")
        logged = capfd.readouterr()
        assert "Traceback" not in logged.err + logged.out, refusal


def test_the_space_warns_about_unknown_characters_as_generate_does(
    space_app, char_rnn_run, caplog, capsys
):
    """A prompt character outside the vocabulary: ``hfattn generate`` names it in a warning,
    and the Space now names it in the same words (it once said nothing)."""
    import logging

    caplog.set_level(logging.WARNING)
    prompt = "ROMEO 😀:"
    assert (
        cli_main(["generate", str(char_rnn_run), "--prompt", prompt, "--max-new-tokens", "2"]) == 0
    )
    assert capsys.readouterr().out.startswith(prompt)
    command = [r.getMessage() for r in caplog.records if r.name.startswith("hfattn")]
    caplog.clear()
    answer = Client(space_app, verbose=False).predict(
        prompt, 0.0, 50, 0.95, 2, api_name="/generate"
    )
    assert answer.startswith(prompt)
    space = [r.getMessage() for r in caplog.records if r.name == "frame"]
    assert command == space == ["prompt characters not in the vocabulary, mapped to <unk>: '😀'"]


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_demo_stopped_by_a_signal_exits_130_and_removes_its_staged_space(
    char_rnn_run, tmp_path, signum
):
    """Ctrl-C and SIGTERM stop ``hfattn demo`` as they stop ``hfattn train``: exit status 130
    (it once exited 0 on Ctrl-C), and nothing left in ``/tmp/hfattn-demo-*`` (SIGTERM once left
    it behind). The command catches SIGINT itself, even when started with it ignored."""
    import socket
    import subprocess
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    demo = subprocess.Popen(
        [sys.executable, "-m", "hfattn", "demo", str(char_rnn_run), "--port", str(port)],
        env={**os.environ, "TMPDIR": str(tmp_path), "GRADIO_ANALYTICS_ENABLED": "False"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # started as a shell starts a background job: SIGINT ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert demo.poll() is None and time.monotonic() < deadline, demo.stderr
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        assert len(list(tmp_path.glob("hfattn-demo-*"))) == 1  # the Space being served
        demo.send_signal(signum)
        # the interrupt reaches the command line (130); not killed by the signal (-15)
        assert demo.wait(timeout=30) == 130
        # one line of hfattn's on stdout; none of Gradio's banner, share hint or
        # "Keyboard interruption" on stderr
        errors = demo.stderr.read()
        assert "Keyboard interruption" not in errors and "share=True" not in errors, errors
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    assert list(tmp_path.glob("hfattn-demo-*")) == []


@pytest.mark.slow
def test_text_generation_in_headless_chromium(space_app, char_rnn_run, tmp_path):
    if not CHROMIUM.exists():
        pytest.skip("chromium is not installed (`make browser` / apt-get install chromium)")
    from playwright.sync_api import expect, sync_playwright

    want = expected_text(char_rnn_run, "ROMEO:")
    with sync_playwright() as playwright:
        # Playwright gives every launch a fresh temporary profile (no --user-data-dir needed).
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(space_app)
            page.locator("#prompt textarea").fill("ROMEO:")
            page.get_by_label("number input for Temperature (0 = greedy)").fill("0")
            page.get_by_label("number input for New tokens").fill(str(NEW_TOKENS))
            page.get_by_role("button", name="Generate").click()
            output = page.locator("#output textarea")
            expect(output).to_have_value(want, timeout=60_000)
            expect(output).to_be_visible()
            page.screenshot(path=tmp_path / "text_generation.png", full_page=True)

            page.locator("#prompt textarea").fill("x" * (MAX_INPUT_CHARS + 50))
            page.get_by_role("button", name="Generate").click()
            toast = page.get_by_test_id("toast-text")
            expect(toast.first).to_be_visible(timeout=30_000)
            expect(toast.first).to_contain_text(
                f"Prompt is {MAX_INPUT_CHARS + 50} characters long; this Space accepts at most {MAX_INPUT_CHARS}"
            )
            # Not full_page: the toast is fixed-position, in the viewport.
            page.screenshot(path=tmp_path / "text_generation_too_long.png")
        finally:
            browser.close()
    assert (tmp_path / "text_generation.png").stat().st_size > 10_000
    assert (tmp_path / "text_generation_too_long.png").stat().st_size > 10_000


@pytest.mark.slow
def test_space_from_hub_runs_without_hfattn(hub_server, char_rnn_run, fresh_python, tmp_path):
    """The pushed Space, downloaded and started like on Spaces (``python app.py``) in an
    environment without hfattn, finds its model through the README and answers."""
    from tests.helpers.fresh_env import space_from_hub

    push_model_folder(char_rnn_run, "tester/space-e2e", space=True)
    start = time.perf_counter()
    with space_from_hub(hub_server, "tester/space-e2e", fresh_python, tmp_path) as (_, url):
        answer = Client(url, verbose=False).predict(
            "ROMEO:", 0.0, 50, 0.95, NEW_TOKENS, api_name="/generate"
        )
        print(f"Space cold start to first answer: {time.perf_counter() - start:.2f}s")
    assert answer == expected_text(char_rnn_run, "ROMEO:")
    # The app found its model through the README's `models:` and downloaded it from the Hub.
    assert hub_server.resolved("tester/space-e2e", "model.safetensors")


# ------------------------------------------------------------------------------- frame
def test_each_loaded_space_imports_its_own_modules(tmp_path):
    """A module beside ``app.py`` (``frame.py``, an app's own engine) comes from the Space being
    loaded, not from a Space loaded earlier in the same process."""
    for value in ("first", "second"):
        space = tmp_path / value
        space.mkdir()
        (space / "engine.py").write_text(f"NAME = {value!r}\n")
        (space / "app.py").write_text("import engine\nNAME = engine.NAME\n")
    assert load_space_app(tmp_path / "first").NAME == "first"
    assert load_space_app(tmp_path / "second").NAME == "second"


def test_frame_model_id_precedence(tmp_path, monkeypatch, char_rnn_run):
    frame = load_space_frame()
    monkeypatch.delenv(frame.MODEL_ENV, raising=False)
    with pytest.raises(RuntimeError, match="no model to serve: set HFATTN_MODEL_ID"):
        frame.resolve_model_id(tmp_path)
    stage_space(inspect_folder(char_rnn_run), "owner/from-readme", tmp_path)
    assert frame.resolve_model_id(tmp_path) == "owner/from-readme"
    monkeypatch.setenv(frame.MODEL_ENV, "owner/from-env")
    assert frame.resolve_model_id(tmp_path) == "owner/from-env"


def test_frame_limits_from_env(monkeypatch):
    frame = load_space_frame()
    monkeypatch.setenv("HFATTN_MAX_NEW_TOKENS", "64")
    assert frame.Limits.from_env() == frame.Limits(max_input_chars=1000, max_new_tokens=64)
    monkeypatch.setenv("HFATTN_MAX_INPUT_CHARS", "0")
    with pytest.raises(ValueError, match="HFATTN_MAX_INPUT_CHARS must be a positive integer"):
        frame.Limits.from_env()


def test_space_for_task_without_app_is_refused(char_rnn_run, tmp_path):
    import dataclasses

    from hfattn.hub import SpaceError

    folder = inspect_folder(char_rnn_run)
    without_app = dataclasses.replace(folder.task, pipeline_tag="summarization", space_app=None)
    folder = dataclasses.replace(folder, task=without_app)
    with pytest.raises(
        SpaceError, match="no Space app for task 'summarization' yet; apps exist for"
    ):
        stage_space(folder, "owner/x", tmp_path)


def test_demo_command_rejects_bad_input(tmp_path, capsys):
    assert cli_main(["demo", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and err.startswith("error: ") and err.count("\n") == 1
    with pytest.raises(SystemExit):
        cli_main(["demo", str(tmp_path), "--share", "maybe"])
    assert "expected true or false" in capsys.readouterr().err
    assert os.environ.get("HFATTN_MODEL_ID") is None
