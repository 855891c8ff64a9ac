"""Every figure is written as a non-blank PNG of the declared size, atomically."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from matplotlib.image import imread

from hfattn.commands import plot as plot_command
from hfattn.plotting.figures import DPI, FIGURE_SIZES, PLOTS, plot


@pytest.mark.parametrize("name", list(PLOTS))
def test_plot_writes_a_non_blank_png_of_the_right_size(name, tmp_path):
    out = plot(name, tmp_path / f"{name}.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = imread(out)
    width, height = FIGURE_SIZES[name]
    assert image.shape[:2] == (round(height * DPI), round(width * DPI))
    rgb = image[..., :3]
    assert rgb.std() > 0.05  # not a blank canvas
    assert (rgb < 0.5).mean() > 0.001  # has dark ink (axes, labels, curves)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{name}.png"]  # no temp file left


def test_unknown_plot_name_lists_the_valid_ones(tmp_path):
    with pytest.raises(ValueError, match="unknown plot 'heatmap'.*positional-encoding, noam"):
        plot("heatmap", tmp_path / "x.png")


def test_failed_plot_leaves_nothing_on_disk(tmp_path, monkeypatch):
    class BrokenFigure:
        def savefig(self, target, **kwargs):
            Path(target).write_bytes(b"half a png")
            raise RuntimeError("disk full")

    monkeypatch.setitem(PLOTS, "noam", BrokenFigure)
    with pytest.raises(RuntimeError, match="disk full"):
        plot("noam", tmp_path / "noam.png")
    assert list(tmp_path.iterdir()) == []


def test_plot_subcommand(tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="hfattn")
    plot_command.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["plot", "noam", "--out", str(tmp_path / "noam.png")])
    assert args.func(args) == 0
    assert (tmp_path / "noam.png").stat().st_size > 1000
    assert "noam.png" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        parser.parse_args(["plot", "bogus"])
