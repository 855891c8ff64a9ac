"""A Python environment *without* hfattn, and a Space app process running in it.

``make_fresh_venv`` creates a bare virtual environment whose only extra import path entry is
the current environment's site-packages, added by a ``.pth`` line: torch, transformers and
gradio import from there, but hfattn does not, because its editable install is activated by
a ``.pth`` file of that site-packages which a plain path entry does not execute. Run its
Python outside the source tree (``cwd`` elsewhere) so that ``./hfattn`` is not importable.

What a user gets from the (local) Hub runs here too: :func:`space_from_hub` downloads a pushed
Space and starts it like Spaces does, :func:`run_card_snippet` runs a model card's usage code
as it is pasted.

Used by the publishing tests and by ``benchmarks/bench_space.py``.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

CHECK_NO_HFATTN = (
    "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('hfattn') is None else 3)"
)


def make_fresh_venv(path: Path) -> Path:
    """Create the environment at ``path`` and return its python executable.

    Raises:
        RuntimeError: if hfattn is importable from it (the test would prove nothing).
    """
    path = Path(path)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(purelib) / "parent_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    check = subprocess.run([str(python), "-c", CHECK_NO_HFATTN], cwd=path, env=clean_env())
    if check.returncode != 0:
        raise RuntimeError(f"hfattn is importable from the fresh environment {path}")
    return python


def clean_env(**overrides: str) -> dict[str, str]:
    """The current environment minus anything that would leak hfattn or a virtualenv into a
    child process, plus ``overrides``."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    }
    env.update(overrides)
    return env


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_space(python: Path, space_dir: Path, env: dict[str, str], timeout: float = 120.0):
    """Run ``python app.py`` in ``space_dir`` as a Space would; return ``(process, url)`` once
    the page answers. The caller terminates the process.

    Raises:
        RuntimeError: with the app's output if it exits or does not answer within ``timeout``.
    """
    port = free_port()
    env = clean_env(
        GRADIO_SERVER_NAME="127.0.0.1",
        GRADIO_SERVER_PORT=str(port),
        GRADIO_ANALYTICS_ENABLED="False",
        **env,
    )
    log = open(space_dir / "space.log", "wb")  # noqa: SIM115 - closed with the process
    process = subprocess.Popen(
        [str(python), "app.py"], cwd=space_dir, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return process, url
        except OSError:
            time.sleep(0.25)
    stop(process)
    raise RuntimeError(f"Space app did not start:\n{(space_dir / 'space.log').read_text()[-3000:]}")


def stop(process: subprocess.Popen) -> None:
    """Terminate ``process`` (then kill it if it lingers)."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def space_from_hub(hub_server, repo_id: str, python: Path, tmp_path: Path) -> Iterator[tuple]:
    """The Space ``repo_id`` downloaded from the local ``hub_server`` into ``tmp_path/space``
    and started there like on Spaces (:func:`start_space`), with the Hub as its only model
    source (``HF_ENDPOINT``, an empty ``HF_HOME`` at ``tmp_path/hf_home``, no token, no
    ``HFATTN_MODEL_ID``: the app finds its model through its README). Yields
    ``(space_dir, url)``; the app is stopped on exit."""
    space_dir = hub_server.download(repo_id, tmp_path / "space", "space")
    env = {
        "HF_ENDPOINT": hub_server.url,
        "HF_HOME": str(tmp_path / "hf_home"),
        "HF_TOKEN": "",
        "HFATTN_MODEL_ID": "",
    }
    process, url = start_space(python, space_dir, env)
    try:
        yield space_dir, url
    finally:
        stop(process)


def run_offline_without_hfattn(python: Path, script: str, *args: str, cwd: Path) -> dict:
    """Run ``python -c script *args`` in ``cwd`` offline (``HF_HUB_OFFLINE=1``, otherwise
    :func:`clean_env`) and return the JSON object its last output line prints. Fails the test
    with the script's stderr if it does not exit cleanly."""
    result = subprocess.run(
        [str(python), "-c", script, *args],
        cwd=cwd,
        env=clean_env(HF_HUB_OFFLINE="1"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def run_card_snippet(
    python: Path | str, card_text: str, cwd: Path, index: int = 0, **env: str
) -> str:
    """Run the ``index``-th fenced Python block of a model card with ``python`` as a user
    pastes it (in ``cwd``, with :func:`clean_env` plus ``env``); returns its last output line.
    Fails the test with the snippet's stderr if it does not exit cleanly."""
    snippet = re.findall(r"```python\n(.*?)```", card_text, re.S)[index]
    result = subprocess.run(
        [str(python), "-c", snippet],
        cwd=cwd,
        env=clean_env(**env),
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip().splitlines()[-1]


def greedy_and_sampled(model, tokenizer, prompt: str = "ROMEO:", n: int = 40) -> dict[str, str]:
    """A greedy and a seeded sampled continuation of ``prompt`` (the fresh-env checks compare
    them with what the same folder gives where hfattn is installed)."""
    ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False).input_ids
    greedy = model.generate(ids, max_new_tokens=n, do_sample=False)
    torch.manual_seed(1234)
    sampled = model.generate(ids, max_new_tokens=n, do_sample=True, temperature=0.9, top_k=20)
    return {"greedy": tokenizer.decode(greedy[0]), "sampled": tokenizer.decode(sampled[0])}


LOAD_SCRIPT = f"""
import importlib.util, json, sys
assert importlib.util.find_spec("hfattn") is None, "hfattn must not be importable here"
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
{inspect.getsource(greedy_and_sampled)}
repo = sys.argv[1]
tokenizer = AutoTokenizer.from_pretrained(repo, trust_remote_code=True)
model = AutoModelForCausalLM.from_pretrained(repo, trust_remote_code=True).eval()
print(json.dumps({{"module": type(model).__module__, **greedy_and_sampled(model, tokenizer)}}))
"""
"""Run with the fresh environment's python and a repo id or folder: prints, as JSON, the
module the model class came from and its greedy and sampled generations."""
