"""Atomic writes reach the disk before they are published: each file is flushed (``fsync``)
before the rename that gives it its name, and the folder holding the rename after it."""

from __future__ import annotations

import os
from pathlib import Path

from hfattn.storage import file_io


def _record(monkeypatch) -> list[tuple[str, str]]:
    """The ``fsync`` (with the path of its descriptor) and ``replace`` calls, in order."""
    events = []
    fsync, replace = os.fsync, os.replace

    def recording_fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        fsync(fd)

    def recording_replace(src, dst, **kwargs):
        events.append(("replace", os.path.abspath(dst)))
        replace(src, dst, **kwargs)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    monkeypatch.setattr(os, "replace", recording_replace)
    return events


def test_a_file_is_flushed_before_its_rename_and_its_folder_after(tmp_path, monkeypatch):
    events = _record(monkeypatch)
    target = tmp_path / "results.json"
    file_io.atomic_write_json(target, {"bleu": 30.1})
    kinds = [kind for kind, _ in events]
    assert kinds == ["fsync", "replace", "fsync"]
    assert Path(events[0][1]).parent == tmp_path and events[0][1] != str(target)  # the temp
    assert events[1][1] == str(target) and events[2][1] == str(tmp_path)


def test_a_folder_is_flushed_whole_before_it_is_renamed_into_place(tmp_path, monkeypatch):
    events = _record(monkeypatch)
    target = tmp_path / "export"
    with file_io.atomic_dir(target) as tmp:
        (tmp / "sub").mkdir()
        (tmp / "sub" / "a.bin").write_bytes(b"a")
        (tmp / "b.bin").write_bytes(b"b")
    rename = events.index(("replace", str(target)))
    flushed = {Path(path).name for kind, path in events[:rename] if kind == "fsync"}
    assert {"a.bin", "b.bin", "sub"} <= flushed
    assert events[rename + 1] == ("fsync", str(tmp_path))
    assert (target / "sub" / "a.bin").read_bytes() == b"a"


def test_files_written_into_a_folder_are_flushed_before_each_rename(tmp_path, monkeypatch):
    events = _record(monkeypatch)
    with file_io.atomic_files(tmp_path / "model") as staged:
        (staged / "config.json").write_text("{}")
    rename = events.index(("replace", str(tmp_path / "model" / "config.json")))
    assert any(kind == "fsync" and path.endswith("config.json") for kind, path in events[:rename])
    assert events[rename + 1] == ("fsync", str(tmp_path / "model"))
