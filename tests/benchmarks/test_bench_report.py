"""``benchmarks/run_all.py`` (``make bench``): one report of every benchmark against its targets.

The runner runs on two stub scripts written here (one meets one target and misses another,
one crashes); a real benchmark, in a tiny configuration, shows the ``--json`` fields.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from benchmarks import run_all
from benchmarks.lib import bench_runs, results_report
from benchmarks.lib.benchlib import is_met, write_atomically

REPO = Path(__file__).resolve().parents[2]


RECORD_FIELDS = {"benchmark", "name", "value", "unit", "target", "comparison", "met", "device"}

GOOD = """
import argparse, sys
from benchmarks.lib.benchlib import BenchReport, add_json_argument
parser = argparse.ArgumentParser()
parser.add_argument("--quick", action="store_true")
add_json_argument(parser)
args = parser.parse_args()
report = BenchReport("good")
report.add("cache speed-up", 3.0 if args.quick else 1.0, "x", 2.0, detail="0.5 s vs 1.5 s")
report.add("time(2048) / time(512)", 6.5, "x", 5.0, "<=")
report.add("tokens/s", 1234.0, "tokens/s")
report.add_series("steps", "time against batch", "batch", "batch size", [8, 16],
                  {"ours": [0.1, 0.2], "reference": [0.1, 0.3]})
report.markdown.append("| system | BLEU |\\n|---|---:|\\n| stub | 1.0 |")
report.write(args.json)
sys.exit(1)  # its own verdict on the target it missed: the measures still count
"""

BAD = """
import sys
print("loading the model")
print("RuntimeError: no such model folder", file=sys.stderr)
sys.exit(3)
"""


def test_is_met_reads_the_comparison():
    assert is_met(2.0, 2.0, ">=") is True and is_met(1.9, 2.0, ">=") is False
    assert is_met(4.2, 5.0, "<=") is True and is_met(5.1, 5.0, "<=") is False
    assert is_met(1.0, None, ">=") is None
    with pytest.raises(ValueError, match="comparison must be one of >=, <="):
        is_met(1.0, 1.0, ">")


def test_a_bare_list_of_records_is_accepted():
    """The shape ``bench_space_load.py`` writes: name, value, target, met."""
    data = bench_runs.normalise(
        [{"name": "answered", "value": 50, "target": 50, "met": True}], "space_load", "cpu"
    )
    (record,) = data["records"]
    assert record == {
        "benchmark": "space_load",
        "name": "answered",
        "value": 50,
        "unit": "",
        "target": 50,
        "comparison": None,
        "met": True,
        "device": "cpu",
    }
    with pytest.raises(ValueError, match="a record lacks value"):
        bench_runs.normalise({"records": [{"name": "x"}]}, "b", "cpu")


def test_the_runner_writes_one_report_atomically(tmp_path, monkeypatch):
    """The stubs run as ``python -m stubs.bench_good``, as the real scripts run as
    ``python -m benchmarks.bench_x``; they import ``benchmarks.lib`` from the repository."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    bench_dir = tmp_path / "stubs"
    bench_dir.mkdir()
    (bench_dir / "bench_good.py").write_text(GOOD)
    (bench_dir / "bench_bad.py").write_text(BAD)
    out, charts = tmp_path / "RESULTS.md", tmp_path / "results"
    kept = f"{results_report.KEEP_BEGIN}\nA note written by hand.\n{results_report.KEEP_END}"
    out.write_text(f"# old report\n\n{kept}\n")
    renames = []
    real_replace = os.replace

    def replace(source, target):
        source, target = Path(source), Path(target)
        # complete under its temp name, in the same folder, before the rename
        renames.append((source.parent == target.parent, target.name, source.read_bytes()))
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", replace)
    argv = ["--bench-dir", str(bench_dir), "--out", str(out), "--charts", str(charts)]
    code = run_all.main([*argv, "--no-cuda"])  # --no-cuda: the report without importing torch
    assert code == 1  # one benchmark failed

    report = out.read_text()
    assert (True, "RESULTS.md", report.encode()) in renames
    assert all(same_folder for same_folder, _, _ in renames)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["RESULTS.md", "results", "stubs"]
    assert sorted(p.name for p in charts.iterdir()) == ["bench_results.json", "good_steps_cpu.png"]

    # quick mode passed --quick to the script that mentions it: 3.0 >= 2 is met
    assert "| cache speed-up | 3× (0.5 s vs 1.5 s) | ≥ 2× | met |" in report
    assert "| time(2048) / time(512) | 6.5× | ≤ 5× | **not met** |" in report
    assert "| tokens/s | 1,234 tokens/s |  | — |" in report
    assert "1 of 2 targets met, 1 benchmark run(s) failed." in report
    assert "| good | cpu | time(2048) / time(512) | 6.5× | ≤ 5× | **not met** |" in report
    assert "| [bad](#bad) | cpu | **failed** | 0 | 0 / 0 |" in report
    assert "**failed**: exit status 3; last lines of its output:" in report
    assert "RuntimeError: no such model folder" in report
    assert "| stub | 1.0 |" in report  # the script's own markdown section
    assert "![good_steps_cpu](results/good_steps_cpu.png)" in report
    assert " -m stubs.bench_good --quick`" in report  # the command to rerun it
    assert "note: exit status 1 after writing its measures; last lines of its output:" in report
    assert report.rstrip().endswith(kept)  # the hand-written block is carried over
    for heading in ("## Machine", "## Summary", "## good", "## bad"):
        assert heading in report
    assert "transformers " in report and "Python " in report

    saved = json.loads((charts / "bench_results.json").read_text())
    statuses = {run["benchmark"]: run["status"] for run in saved["runs"]}
    assert statuses == {"bad": "failed", "good": "ok"}

    # --update: rerun one benchmark, keep the other's previous result (and its date)
    (bench_dir / "bench_bad.py").write_text("raise SystemExit('must not run')")
    assert run_all.main([*argv, "--no-cuda", "--only", "good", "--update"]) == 0
    again = json.loads((charts / "bench_results.json").read_text())["runs"]
    assert [(r["benchmark"], r["status"]) for r in again] == [("bad", "failed"), ("good", "ok")]
    assert again[0] == saved["runs"][0]
    assert "exit status 3" in out.read_text()


def test_an_unknown_benchmark_name_is_an_error_listing_the_known_ones(tmp_path):
    (tmp_path / "bench_good.py").write_text(GOOD)
    with pytest.raises(SystemExit, match="no benchmark 'nope' in .*; known: good"):
        run_all.main(["--bench-dir", str(tmp_path), "--only", "nope"])


def test_a_real_benchmark_writes_the_json_fields(tmp_path, monkeypatch):
    """``bench_char_rnn`` on tiny settings, run as ``python -m`` runs it (its ``main`` reads
    ``sys.argv``) in this process."""
    from benchmarks import bench_char_rnn

    path = tmp_path / "char_rnn.json"
    tiny = ["--steps", "1", "--batch", "4", "--new-chars", "10", "--batch-sizes", "2", "4",
            "--series-steps", "1"]  # fmt: skip
    monkeypatch.setattr(sys, "argv", ["bench_char_rnn", *tiny, "--json", str(path)])
    bench_char_rnn.main()
    data = json.loads(path.read_text())
    assert data["benchmark"] == "char_rnn" and data["not_run"] is None
    assert len(data["records"]) == 2
    for record in data["records"]:
        assert set(record) - {"detail"} == RECORD_FIELDS
        assert record["device"] == "cpu" and record["comparison"] == ">="
        assert record["met"] == (record["value"] >= record["target"])
    assert [r["target"] for r in data["records"]] == [0.90, 20.0]
    kinds = {s["name"]: s for s in data["series"]}
    assert kinds["generation_length"]["kind"] == "seq_len"
    assert set(kinds["generation_length"]["lines"]) == {"state cache", "re-run on growing text"}
    batch = kinds["training_batch"]
    assert batch["kind"] == "batch" and batch["x"] == [2, 4]
    assert all(len(v) == 2 and min(v) > 0 for v in batch["lines"].values())


def test_a_benchmark_file_is_written_whole_with_a_plain_files_mode(tmp_path):
    """``write_atomically`` is hfattn's atomic writer: ``0o644`` under umask 022 (not the
    ``0o600`` of a temporary file), text as UTF-8, and no temporary file left beside it."""
    saved = os.umask(0o022)
    try:
        write_atomically(tmp_path / "results" / "r.md", "ratio ≥ 2\n")
        write_atomically(tmp_path / "results" / "r.bin", b"\x00\x01")
    finally:
        os.umask(saved)
    files = sorted(tmp_path.joinpath("results").iterdir())
    assert [f.name for f in files] == ["r.bin", "r.md"]
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o644 for f in files)
    assert files[1].read_text(encoding="utf-8") == "ratio ≥ 2\n"
    assert files[0].read_bytes() == b"\x00\x01"
