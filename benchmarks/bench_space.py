"""Publishing benchmarks on CPU, against the local Hub of the tests (no network).

1. Push + fresh-environment load round trip: ``push_model_folder`` to the local Hub, then a
   new Python process in an environment without hfattn runs ``from_pretrained(repo,
   trust_remote_code=True)`` and generates once.
2. Space cold start to first answer: the pushed Space is downloaded and started like on
   Spaces (``python app.py``, model from the README via the Hub); time from process start
   to the first answer through ``gradio_client``.
3. Answer time of that Space over N sequential requests (p50 / p95 / max).

    .venv/bin/python -m benchmarks.bench_space [--model runs/char_rnn_shakespeare] [--requests 20]
        [--json PATH]

Without ``--model`` it uses ``runs/char_rnn_shakespeare`` when that run exists, else a
char-RNN of the recipe's size (GRU 384, embedding 64) trained for 60 steps on an excerpt.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.lib.benchlib import BenchReport, add_json_argument
from hfattn.storage.model_folder import CONFIG_FILE
from tests.helpers.fresh_env import clean_env, make_fresh_venv, start_space, stop
from tests.helpers.hub_server import HubServer

ROOT = Path(__file__).resolve().parents[1]


LABELS = {
    "push_s": "push_model_folder (create repo + one commit)",
    "fresh_env_load_and_generate_s": "fresh env without hfattn: from_pretrained + generate",
    "round_trip_s": "push + fresh-env load round trip",
    "space_cold_start_to_first_answer_s": "Space cold start to first answer",
    "answer_p50_s": "Space answer time, p50",
    "answer_p95_s": "Space answer time, p95",
    "answer_max_s": "Space answer time, max",
}
"""The report's name of each timing (``--json``)."""

LOAD_AND_GENERATE = """
import sys
from transformers import AutoModelForCausalLM, AutoTokenizer
tok = AutoTokenizer.from_pretrained(sys.argv[1], trust_remote_code=True)
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], trust_remote_code=True)
ids = tok("ROMEO:", return_tensors="pt", add_special_tokens=False).input_ids
model.generate(ids, max_new_tokens=50, do_sample=False)
"""


def recipe_sized_model(out: Path) -> Path:
    """A char-RNN with the size of ``recipes/char_rnn_shakespeare.yaml`` (GRU 384, embedding
    64), briefly trained on a short excerpt so that it does not stop early on ``<eos>``."""
    from tests.helpers.tiny_runs import build_char_rnn_run

    return build_char_rnn_run(out, embedding_dim=64, hidden_size=384, steps=60)


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) by linear interpolation between order statistics."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low, high = int(position), min(int(position) + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def main() -> int:
    """Run the three measurements and print them as JSON and as a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--new-tokens", type=int, default=200)
    add_json_argument(parser)
    args = parser.parse_args()

    from gradio_client import Client
    from huggingface_hub import HfApi

    from hfattn.hub import push_model_folder

    tmp = Path(tempfile.mkdtemp(prefix="bench-space-"))
    model_dir = args.model or ROOT / "runs" / "char_rnn_shakespeare"
    if args.model is None and not (model_dir / CONFIG_FILE).is_file():
        model_dir = recipe_sized_model(tmp / "model")
    python = make_fresh_venv(tmp / "venv")
    results: dict[str, object] = {"model": str(model_dir), "load_avg": os.getloadavg()[0]}

    with HubServer(tmp / "hub") as hub:
        os.environ.update(HF_ENDPOINT=hub.url, HF_TOKEN="hf_benchmark", HF_HOME=str(tmp / "hf"))
        start = time.perf_counter()
        push_model_folder(model_dir, "bench/char-rnn", space=True)
        pushed = time.perf_counter()
        env = clean_env(HF_HOME=str(tmp / "hf_fresh"))
        subprocess.run(
            [str(python), "-c", LOAD_AND_GENERATE, "bench/char-rnn"],
            cwd=tmp, env=env, check=True, capture_output=True, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        loaded = time.perf_counter()
        results["push_s"] = round(pushed - start, 2)
        results["fresh_env_load_and_generate_s"] = round(loaded - pushed, 2)
        results["round_trip_s"] = round(loaded - start, 2)

        space_dir = Path(
            HfApi(endpoint=hub.url).snapshot_download(
                "bench/char-rnn", repo_type="space", local_dir=tmp / "space"
            )
        )
        space_env = {"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp / "hf_space"), "HF_TOKEN": ""}
        start = time.perf_counter()
        process, url = start_space(python, space_dir, space_env)
        try:
            client = Client(url, verbose=False)
            call = ("ROMEO:\n", 0.8, 50, 0.95, args.new_tokens)
            client.predict(*call, api_name="/generate")
            results["space_cold_start_to_first_answer_s"] = round(time.perf_counter() - start, 2)
            times, lengths = [], []
            for _ in range(args.requests):
                t0 = time.perf_counter()
                answer = client.predict(*call, api_name="/generate")
                times.append(time.perf_counter() - t0)
                lengths.append(len(answer) - len(call[0]))
        finally:
            stop(process)
    results["requests"] = args.requests
    results["new_tokens"] = args.new_tokens
    results["generated_chars_mean"] = round(statistics.mean(lengths), 1)
    results["answer_p50_s"] = round(statistics.median(times), 3)
    results["answer_p95_s"] = round(percentile(times, 0.95), 3)
    results["answer_max_s"] = round(max(times), 3)
    report = BenchReport("space")
    print(json.dumps(results, indent=2))
    print("\n| measurement | seconds |\n|---|---|")
    for key, value in results.items():
        if key.endswith("_s"):
            print(f"| {key} | {value} |")
            report.add(LABELS[key], value, "s")
    report.write(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
