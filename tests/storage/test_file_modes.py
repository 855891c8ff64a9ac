"""hfattn's files get the mode a plain ``open`` gives (``0o666 & ~umask``), not the private
``0o600`` of a temporary file or of ``safetensors``' writer, and a failed write leaves no
partial file (:mod:`hfattn.storage.file_io`, the one home of file writes)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hfattn.cli import main
from hfattn.plotting.figures import plot
from hfattn.storage import file_io
from tests.helpers.recipe_helpers import write_recipe


@pytest.fixture
def umask():
    """Set the process umask for the test (restored after it)."""
    saved = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(saved)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_trained_run_and_a_plot_are_readable_by_all_under_umask_022(tmp_path, umask):
    umask(0o022)
    training = {"max_steps": 2, "eval_every": 2, "save_every": 2}
    recipe = write_recipe(tmp_path, training=training, hub={"license": "mit"})
    assert main(["train", str(recipe)]) == 0
    run = tmp_path / "run"
    named = [
        "model.safetensors",
        "recipe.yaml",
        "eval_results.json",
        "loss_curve.png",
        "samples.md",
        "checkpoints/best/model.safetensors",
        "checkpoints/step-2/model.safetensors",
        "checkpoints/step-2/progress.json",
    ]
    assert {name: oct(_mode(run / name)) for name in named} == {n: "0o644" for n in named}
    modes = {str(p.relative_to(run)): _mode(p) for p in run.rglob("*")}
    assert {p: oct(m) for p, m in modes.items() if m not in (0o644, 0o755)} == {}
    assert not [p for p in modes if Path(p).name.startswith(".")]  # no temporary left
    assert _mode(plot("noam", tmp_path / "plots" / "noam.png")) == 0o644


def test_the_mode_follows_the_umask(tmp_path, umask):
    umask(0o027)
    file_io.atomic_write_text(tmp_path / "a.txt", "a")
    with file_io.atomic_dir(tmp_path / "folder") as tmp:
        (tmp / "b.bin").write_bytes(b"b")
    assert (_mode(tmp_path / "a.txt"), _mode(tmp_path / "folder")) == (0o640, 0o750)
    assert _mode(tmp_path / "folder" / "b.bin") == 0o640


def test_a_failed_write_leaves_no_partial_file(tmp_path):
    target = tmp_path / "model.safetensors"
    target.write_bytes(b"old")
    with pytest.raises(OSError, match="disk full"), file_io.atomic_path(target) as tmp:
        tmp.write_bytes(b"half a")
        raise OSError("disk full")
    assert target.read_bytes() == b"old"
    with pytest.raises(OSError), file_io.atomic_files(tmp_path) as staged:
        (staged / "config.json").write_text("{}")
        raise OSError("disk full")
    folder = tmp_path / "ct2"
    folder.mkdir()
    (folder / "model.bin").write_bytes(b"old")
    with pytest.raises(OSError), file_io.atomic_dir(folder) as tmp:
        (tmp / "model.bin").write_bytes(b"half")
        raise OSError("disk full")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ct2", "model.safetensors"]
    assert [p.name for p in folder.iterdir()] == ["model.bin"]
    assert (folder / "model.bin").read_bytes() == b"old"
    # a whole write replaces the file and the folder
    file_io.atomic_write_bytes(target, b"new")
    with file_io.atomic_dir(folder) as tmp:
        (tmp / "model.bin").write_bytes(b"new")
    assert target.read_bytes() == (folder / "model.bin").read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ct2", "model.safetensors"]


@pytest.mark.parametrize("writer", ["atomic_dir", "atomic_path", "atomic_files"])
def test_a_failed_write_names_the_users_path_not_the_temporary_one(tmp_path, monkeypatch, writer):
    """A failed atomic write (:class:`~hfattn.storage.file_io.FileWriteError`, an ``OSError``)
    names the file or folder the user gave (once it named ``.ct2.74quhve4.tmp``): when the
    temporary name cannot be made (a read-only folder), and when a file under a temporary
    folder cannot be written."""
    target = tmp_path / "out" / ("ct2" if writer != "atomic_path" else "model.bin")
    target.parent.mkdir()
    made = tmp_path / "made"

    def refused(*, prefix, dir, suffix=""):  # noqa: A002 - tempfile's name
        name = os.path.join(dir, f"{prefix}74quhve4{suffix}")
        raise PermissionError(13, "Permission denied", name)

    with monkeypatch.context() as patch:
        for name in ("mkdtemp", "mkstemp"):
            patch.setattr(file_io.tempfile, name, refused)
        with pytest.raises(file_io.FileWriteError) as caught, getattr(file_io, writer)(target):
            made.touch()
    assert not made.exists()
    assert caught.value.errno == 13
    assert str(caught.value) == f"cannot write {target} (Permission denied)"
    assert ".tmp" not in str(caught.value) and "74quhve4" not in str(caught.value)

    if writer == "atomic_path":
        return
    with pytest.raises(OSError) as caught, getattr(file_io, writer)(target) as tmp:
        (tmp / "sub").mkdir()
        (tmp / "sub" / "x.bin").mkdir()
        open(tmp / "sub" / "x.bin", "w")  # a folder, not a file: IsADirectoryError
    assert caught.value.filename == str(target / "sub" / "x.bin")
    assert [p for p in target.parent.rglob("*") if p != target] == []  # nothing left behind


def test_unwritable_folder_is_the_nearest_existing_folder_that_refuses(tmp_path, monkeypatch):
    locked = tmp_path / "locked"
    locked.mkdir()
    assert file_io.unwritable_folder(locked / "a" / "b" / "ct2") is None
    real = os.access
    monkeypatch.setattr(
        file_io.os, "access", lambda p, mode: Path(p) != locked and real(p, mode)
    )  # as a read-only folder answers (root's permissions are never refused)
    assert file_io.unwritable_folder(locked / "a" / "b" / "ct2") == locked
    assert file_io.unwritable_folder(locked) is None  # created in tmp_path
    assert file_io.unwritable_folder(tmp_path / "other") is None
