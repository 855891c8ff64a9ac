"""The prepared-data cache (:mod:`hfattn.data.prepared`): the key and what changes it, a
preparation killed with ``kill -9``, a cache location that cannot be written, two processes
asking for the same data at once, and listing and removing prepared folders.

The builds here write a few bytes; the processes that must overlap are ordered by files and
log lines they wait for, never by sleeping."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock

from hfattn.data import prepared
from hfattn.data.prepared import MANIFEST_FILE, data_key, prepare, source_identity
from hfattn.data.prepared_cache import folders_aside, list_prepared, remove_aside, remove_prepared

ROOT = Path(__file__).resolve().parents[2]


def counting_build(counter: Path, payload: str = "ids"):
    """A build that writes ``payload`` to ``data.txt`` and counts its runs in ``counter``."""

    def build(folder: Path) -> dict:
        with open(counter, "a") as f:
            f.write("built\n")
        (folder / "data.txt").write_text(payload)
        return {"rows": len(payload)}

    return build


def runs(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


# ---- the key -----------------------------------------------------------------------------------
def test_the_key_is_the_task_and_a_digest_of_settings_and_format(monkeypatch):
    settings = {"source": {"name": "genre"}, "data": {"seed": 0, "max_length": 128}}
    key = data_key("classification", settings)
    assert key.startswith("classification-") and len(key) == len("classification-") + 16
    reordered = {"data": {"max_length": 128, "seed": 0}, "source": {"name": "genre"}}
    assert data_key("classification", reordered) == key  # the order of the fields is no change
    assert data_key("translation", settings) != key
    assert data_key("classification", {**settings, "data": {"seed": 1, "max_length": 128}}) != key
    monkeypatch.setattr(prepared, "FORMAT_VERSION", prepared.FORMAT_VERSION + 1)
    assert data_key("classification", settings) != key


def test_a_source_file_rewritten_or_a_folder_changed_gives_a_new_identity(tmp_path):
    text = tmp_path / "corpus.txt"
    text.write_text("to be or not to be")
    first = source_identity(str(text))
    assert first["path"] == str(text.resolve())
    assert source_identity(str(text)) == first  # nothing changed: the same identity
    stat = text.stat()
    text.write_text("to be or not to go")  # the same size, new content
    os.utime(text, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    second = source_identity(str(text))
    assert second != first
    text.write_text("to be or not to be, that is the question")
    os.utime(text, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # the mtime kept
    assert source_identity(str(text)) not in (first, second)  # the size tells

    folder = tmp_path / "saved"
    (folder / "train").mkdir(parents=True)
    (folder / "train" / "data.arrow").write_bytes(b"1234")
    before = source_identity(str(folder))
    (folder / "test").mkdir()
    (folder / "test" / "data.arrow").write_bytes(b"56")
    assert source_identity(str(folder)) != before
    assert source_identity("genre") == {"name": "genre"}  # an embedded corpus, a Hub id


def overwrite_keeping_size_and_mtime(path: Path, offset: int) -> None:
    """Change the byte at ``offset`` of ``path`` and put its modification time back, as
    ``cp -p`` or ``rsync -t`` of an edited copy would."""
    stat = path.stat()
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)


def test_a_same_size_edit_with_its_mtime_put_back_gives_a_new_key(tmp_path):
    """The sample of the file's bytes tells: anywhere in a file of up to 1 MiB, in a sampled
    block of a larger one (the first, the last); an edit of a larger file that falls between
    sampled blocks goes unseen, as the module says."""
    small = tmp_path / "small.txt"
    small.write_text("to be or not to be\n" * 1000)
    large = tmp_path / "large.bin"
    large.write_bytes(bytes(range(256)) * (3 * 2**20 // 256))  # 3 MiB: 16 sampled blocks
    edits = [(small, 9_500), (large, 10), (large, 3 * 2**20 - 1)]
    for path, offset in edits:
        key = data_key("toy", {"source": source_identity(str(path))})
        overwrite_keeping_size_and_mtime(path, offset)
        assert data_key("toy", {"source": source_identity(str(path))}) != key, (path, offset)
    between = prepared.SAMPLE_BLOCK_BYTES + 1_000  # past the first block, before the second
    assert between < (3 * 2**20 - prepared.SAMPLE_BLOCK_BYTES) // (prepared.SAMPLE_BLOCKS - 1)
    key = data_key("toy", {"source": source_identity(str(large))})
    overwrite_keeping_size_and_mtime(large, between)
    assert data_key("toy", {"source": source_identity(str(large))}) == key


def test_the_identity_reads_the_same_bytes_of_a_file_whatever_its_size(tmp_path, monkeypatch):
    """1 MiB of a 16 MiB file and of a 16 GiB one (sparse: nothing written), counted at the
    reads of the files the identity opens."""
    read: list[int] = []

    class Counted:
        def __init__(self, handle):
            self.handle = handle

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def seek(self, *args):
            return self.handle.seek(*args)

        def read(self, size=-1):
            data = self.handle.read(size)
            read[-1] += len(data)
            return data

    def counted_open(path, *args, **kwargs):
        read.append(0)
        return Counted(open(path, *args, **kwargs))

    monkeypatch.setattr(prepared, "open", counted_open, raising=False)
    for size in (16 * 2**20, 16 * 2**30):
        path = tmp_path / f"{size}.bin"
        with open(path, "wb") as f:
            f.truncate(size)
        assert source_identity(str(path))["files"][0][1] == size
    assert read == [prepared.SAMPLE_BLOCKS * prepared.SAMPLE_BLOCK_BYTES] * 2 == [2**20] * 2


def test_a_second_prepare_reuses_and_a_changed_key_prepares_anew(cache, tmp_path, monkeypatch):
    counter = tmp_path / "runs.txt"
    source = tmp_path / "corpus.txt"
    source.write_text("abc")

    def ask(**data):
        settings = {"source": source_identity(str(source)), "data": {"seed": 0, **data}}
        return prepare("toy", settings, counting_build(counter), what="the toy corpus")

    first = ask()
    assert (first.reused, runs(counter)) == (False, 1)
    assert first.folder.parent == cache and (first.folder / "data.txt").read_text() == "ids"
    manifest = json.loads((first.folder / MANIFEST_FILE).read_text())
    assert manifest["rows"] == 3 and manifest["what"] == "the toy corpus"
    assert manifest["format"] == prepared.FORMAT_VERSION
    again = ask()
    assert (again.reused, again.folder, runs(counter)) == (True, first.folder, 1)
    assert again.record() == {"folder": str(first.folder), "reused": True,
                              "seconds": round(again.seconds, 2),
                              "prepared_by": first.prepared_by}  # fmt: skip

    assert ask(seed=1).folder != first.folder and runs(counter) == 2  # a setting changed
    source.write_text("abcd")  # the source rewritten
    rewritten = ask()
    assert rewritten.folder not in (first.folder,) and not rewritten.reused and runs(counter) == 3
    monkeypatch.setattr(prepared, "FORMAT_VERSION", prepared.FORMAT_VERSION + 1)
    newer = ask()
    assert newer.folder != rewritten.folder and not newer.reused and runs(counter) == 4


def test_a_build_that_fails_leaves_nothing_and_the_next_one_builds(cache, tmp_path):
    def failing(folder: Path):
        (folder / "data.txt").write_text("half")
        raise RuntimeError("the tokenizer failed")

    with pytest.raises(RuntimeError, match="tokenizer failed"):
        prepare("toy", {"n": 1}, failing, what="toy")
    assert [p.name for p in cache.iterdir() if not p.name.endswith(".lock")] == []
    counter = tmp_path / "runs.txt"
    result = prepare("toy", {"n": 1}, counting_build(counter), what="toy")
    assert not result.reused and runs(counter) == 1


def test_a_leftover_folder_without_manifest_is_not_taken_for_prepared_data(cache, tmp_path):
    """A folder at the key's name that holds no manifest (a removal cut short) is built anew."""
    name = data_key("toy", {"n": 2})
    (cache / name).mkdir(parents=True)
    (cache / name / "data.txt").write_text("stale")
    counter = tmp_path / "runs.txt"
    result = prepare("toy", {"n": 2}, counting_build(counter), what="toy")
    assert (result.reused, runs(counter)) == (False, 1)
    assert (result.folder / "data.txt").read_text() == "ids"
    assert (result.folder / MANIFEST_FILE).is_file()


# ---- a preparation killed, two at once --------------------------------------------------------
PREPARE_SCRIPT = """
import json, logging, os, signal, sys, time
from pathlib import Path
from hfattn.data.prepared import prepare

logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
mode, counter, gate = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])

def build(folder):
    with open(counter, "a") as f:
        f.write(f"{os.getpid()}\\n")
    (folder / "part-1.bin").write_bytes(b"x" * 1000)
    if mode == "kill":  # a part written, then kill -9
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "kill-after-manifest":  # every file, its own manifest too, not yet renamed
        (folder / "manifest.json").write_text(json.dumps({"task": "toy"}))
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "hold":  # until the test opens the gate
        print("building", file=sys.stderr, flush=True)
        while not gate.exists():
            time.sleep(0.02)
    (folder / "part-2.bin").write_bytes(b"y" * 1000)
    return {"parts": 2}

result = prepare("toy", {"corpus": "shared"}, build, what="the shared toy corpus")
print(json.dumps({"folder": str(result.folder), "reused": result.reused}), flush=True)
"""


def start(mode: str, tmp_path: Path, cache: Path) -> subprocess.Popen:
    """A process that prepares the ``toy`` data into ``cache`` (see :data:`PREPARE_SCRIPT`)."""
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            PREPARE_SCRIPT,
            mode,
            str(tmp_path / "runs.txt"),
            str(tmp_path / "gate"),
        ],  # fmt: skip
        cwd=ROOT,
        env={**os.environ, "HFATTN_PREPARED_DIR": str(cache)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("mode", ["kill", "kill-after-manifest"])
def test_a_preparation_killed_is_never_taken_for_complete(mode, cache, tmp_path):
    killed = start(mode, tmp_path, cache)
    out, _ = killed.communicate()
    assert killed.returncode == -signal.SIGKILL and out == ""
    name = data_key("toy", {"corpus": "shared"})
    assert not (cache / name).exists()
    stale = [p for p in cache.iterdir() if p.is_dir()]
    assert len(stale) == 1 and stale[0].name.startswith(f".{name}.")  # the half-written folder
    assert (stale[0] / "part-1.bin").is_file()
    assert list_prepared() == []  # not listed, even with a manifest of its own
    assert folders_aside() == stale

    rerun = start("plain", tmp_path, cache)
    out, err = rerun.communicate()
    assert rerun.returncode == 0, err
    report = json.loads(out)
    assert report == {"folder": str(cache / name), "reused": False}
    assert runs(tmp_path / "runs.txt") == 2  # the killed build and this one
    assert sorted(p.name for p in (cache / name).iterdir()) == [
        MANIFEST_FILE, "part-1.bin", "part-2.bin"]  # fmt: skip
    assert json.loads((cache / name / MANIFEST_FILE).read_text())["parts"] == 2
    assert [p for p in cache.iterdir() if p.is_dir()] == [cache / name]  # the stale one gone


def test_two_processes_asking_at_once_prepare_once(cache, tmp_path):
    first = start("hold", tmp_path, cache)
    second = None
    try:
        assert first.stderr.readline().strip().startswith("preparing the shared toy corpus")
        assert first.stderr.readline().strip() == "building"  # holds the lock, mid-build
        second = start("plain", tmp_path, cache)
        line = second.stderr.readline()
        assert line.startswith("waiting for another process preparing the shared toy corpus")
        (tmp_path / "gate").touch()
        reports = [json.loads(p.communicate()[0]) for p in (first, second)]
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
    assert (first.returncode, second.returncode) == (0, 0)
    assert runs(tmp_path / "runs.txt") == 1
    folder = str(cache / data_key("toy", {"corpus": "shared"}))
    assert reports == [{"folder": folder, "reused": False}, {"folder": folder, "reused": True}]


# ---- a cache that cannot be written -----------------------------------------------------------
def test_a_cache_location_that_cannot_be_written_falls_back_in_one_line(
    tmp_path, monkeypatch, caplog
):
    """``HFATTN_PREPARED_DIR`` under a regular file: no one, root included, can create it."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file")
    monkeypatch.setenv("HFATTN_PREPARED_DIR", str(blocker / "prepared"))
    counter = tmp_path / "runs.txt"
    with caplog.at_level(logging.WARNING, logger="hfattn.data.prepared"):
        result = prepare("toy", {"n": 3}, counting_build(counter), what="toy")
        again = prepare("toy", {"n": 3}, counting_build(counter), what="toy")
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "\n" not in warnings[0], warnings
    assert str(blocker / "prepared") in warnings[0] and "HFATTN_PREPARED_DIR" in warnings[0]
    assert "not a folder" in warnings[0]
    assert not result.reused and (result.folder / "data.txt").read_text() == "ids"
    assert str(result.folder.parent) in warnings[0]  # the temporary folder is named
    assert not result.folder.is_relative_to(blocker)
    assert (again.reused, again.folder, runs(counter)) == (True, result.folder, 1)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder anyway")
def test_a_read_only_cache_folder_falls_back(tmp_path, monkeypatch, caplog):
    root = tmp_path / "read-only"
    root.mkdir()
    root.chmod(0o555)
    monkeypatch.setenv("HFATTN_PREPARED_DIR", str(root))
    try:
        with caplog.at_level(logging.WARNING, logger="hfattn.data.prepared"):
            result = prepare("toy", {"n": 4}, counting_build(tmp_path / "runs.txt"), what="toy")
    finally:
        root.chmod(0o755)
    assert [r.getMessage() for r in caplog.records if "not writable" in r.getMessage()]
    assert not result.folder.is_relative_to(root) and (result.folder / "data.txt").is_file()


# ---- list and remove ----------------------------------------------------------------------------
def test_list_and_remove(cache, tmp_path):
    counter = tmp_path / "runs.txt"
    one = prepare("toy", {"n": 1}, counting_build(counter, "a" * 10), what="the first toy")
    two = prepare("other", {"n": 1}, counting_build(counter, "b" * 2000), what="the second toy")
    rows = list_prepared()
    assert [r["name"] for r in rows] == [one.folder.name, two.folder.name]  # oldest first
    assert [(r["task"], r["what"]) for r in rows] == [("toy", "the first toy"),
                                                       ("other", "the second toy")]  # fmt: skip
    assert rows[1]["size"] == sum(p.stat().st_size for p in two.folder.rglob("*") if p.is_file())
    assert rows[1]["size"] > 2000 and rows[0]["folder"] == str(one.folder)
    assert all(r["created"] for r in rows)

    with pytest.raises(ValueError, match=r"no prepared data named 'toy-nope' in .*2 folder"):
        remove_prepared(["toy-nope", one.folder.name])
    assert one.folder.is_dir()  # nothing removed when one name is unknown
    assert remove_prepared([one.folder.name, one.folder.name]) == [one.folder]
    assert not one.folder.exists() and folders_aside() == []
    assert [r["name"] for r in list_prepared()] == [two.folder.name]
    again = prepare("toy", {"n": 1}, counting_build(counter, "a" * 10), what="the first toy")
    assert not again.reused and runs(counter) == 3  # removed data is prepared again
    assert list_prepared(tmp_path / "nowhere") == []


def test_list_and_remove_leave_what_is_not_prepared_data_alone(cache, tmp_path):
    prepare("toy", {"n": 1}, counting_build(tmp_path / "runs.txt"), what="toy")
    (cache / "notes").mkdir()  # a folder of the user's, no manifest
    (cache / "README").write_text("mine")
    assert len(list_prepared()) == 1
    with pytest.raises(ValueError, match="no prepared data named 'notes'"):
        remove_prepared(["notes"])
    assert (cache / "notes").is_dir()


def test_remove_aside_deletes_what_no_process_works_on(cache, tmp_path):
    killed = start("kill", tmp_path, cache)
    killed.communicate()
    other = cache / ".other-0123456789abcdef.abc123.tmp"  # another key's, its build under way
    (other / "sub").mkdir(parents=True)
    (stale,) = [p for p in folders_aside() if p != other]
    with FileLock(cache / ".other-0123456789abcdef.lock"):
        assert remove_aside() == [stale]
    assert folders_aside() == [other] and not stale.exists()
    assert remove_aside() == [other] and folders_aside() == []


def test_list_marks_the_preparations_no_recipe_would_reuse(cache, tmp_path):
    """A preparation whose local source changed (a same-size edit, its mtime put back), or is
    gone, or that an older hfattn keyed, is stale; one of an unchanged file or of a name (an
    embedded corpus, a Hub id) is not."""
    counter = tmp_path / "runs.txt"
    sources = {name: tmp_path / f"{name}.txt" for name in ("kept", "edited", "gone", "older")}
    for name, path in sources.items():
        path.write_text(f"the {name} corpus")
        prepare("toy", {"source": source_identity(str(path))}, counting_build(counter), what=name)
    prepare("toy", {"source": source_identity("genre")}, counting_build(counter), what="genre")
    overwrite_keeping_size_and_mtime(sources["edited"], 4)
    sources["gone"].unlink()
    (older,) = [row for row in list_prepared() if row["what"] == "older"]
    manifest = json.loads((Path(older["folder"]) / MANIFEST_FILE).read_text())
    manifest["settings"]["source"]["files"][0].pop()  # no sample of its bytes
    (Path(older["folder"]) / MANIFEST_FILE).write_text(json.dumps(manifest))
    stale = {row["what"]: row["stale"] for row in list_prepared()}
    assert stale == {"kept": None, "edited": "source changed", "gone": "source missing",
                     "older": "made by an older hfattn", "genre": None}  # fmt: skip
