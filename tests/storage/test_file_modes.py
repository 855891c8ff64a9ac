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
