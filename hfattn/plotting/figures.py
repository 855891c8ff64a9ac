"""Figures of the methods (positional encodings, schedules, scores) and of a trained model's
attention, drawn with matplotlib's Agg canvas (no display, no pyplot state).

``plot(name, out_path)`` writes one PNG (atomically: a temporary file, then ``os.replace``).
Names, in :data:`PLOTS`:

- ``positional-encoding``: sinusoidal ``PE[t, i]`` for 2000 positions x 500 dimensions.
- ``noam``: ``lr = d^-0.5 min(t^-0.5, t w^-1.5)`` for ``d = 512``, ``w = 4000``.
- ``warmup``: Ma & Yarats' four warmup factors and RAdam's rectification ``r_t`` over
  18000 steps with ``beta2 = 0.999``.
- ``sigmoid``: ``sigma(x)`` and ``sigma'(x) = sigma(x) (1 - sigma(x))``.
- ``scores``: one panel per scoring function: the weights each gives to the same 10 keys
  for the same query (its default distribution; learnable scores at a fixed seed).
- ``attention`` (``model_dir``, ``text``, optional ``layer`` / ``head``): the alignment heatmap
  of a translation model (a Transformer's last layer, mean over heads, by default).

Importing this module is cheap: torch and matplotlib are imported by the plot functions.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ..storage.file_io import atomic_path
from ..training.schedules import (
    exponential_warmup,
    linear_warmup,
    noam_lr,
    radam_rectification,
    untuned_exponential_warmup,
    untuned_linear_warmup,
)

DPI = 100
FIGURE_SIZES: dict[str, tuple[float, float]] = {
    "positional-encoding": (10.0, 6.0),
    "noam": (8.0, 5.0),
    "warmup": (9.0, 5.5),
    "sigmoid": (8.0, 5.0),
    "scores": (16.0, 10.0),
}
"""Figure sizes in inches; the PNG is ``size * DPI`` pixels."""


def _figure(name: str):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=FIGURE_SIZES[name], dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def positional_encoding_figure(num_positions: int = 2000, dim: int = 500, base: float = 10000.0):
    """Heatmap of ``PE[t, 2i] = sin(t / base^(2i/d))``, ``PE[t, 2i+1] = cos(...)``."""
    # torch and transformers (5-7 s): the schedule plots need neither
    from ..models.positional import sinusoidal_position_encoding

    table = sinusoidal_position_encoding(num_positions, dim, base).numpy()
    figure = _figure("positional-encoding")
    axes = figure.add_subplot()
    image = axes.imshow(
        table, aspect="auto", cmap="RdBu", vmin=-1, vmax=1, interpolation="nearest", origin="upper"
    )
    axes.set_xlabel("encoding dimension i")
    axes.set_ylabel("position t")
    axes.set_title(f"Sinusoidal positional encoding ({num_positions} positions x {dim} dims)")
    figure.colorbar(image, ax=axes, label="PE[t, i]")
    return figure


def noam_figure(d_model: int = 512, warmup: int = 4000, steps: int = 20000):
    """The Noam schedule ``d^-0.5 min(t^-0.5, t w^-1.5)``, its peak marked."""

    t = range(1, steps + 1)
    lr = [noam_lr(s, d_model, warmup) for s in t]
    figure = _figure("noam")
    axes = figure.add_subplot()
    axes.plot(list(t), lr, color="tab:blue", label=f"d_model={d_model}, warmup={warmup}")
    peak = noam_lr(warmup, d_model, warmup)
    axes.axvline(warmup, color="grey", linestyle="--", linewidth=1)
    axes.annotate(
        f"peak {peak:.3e} at step {warmup}",
        xy=(warmup, peak),
        xytext=(warmup * 1.4, peak * 0.95),
        arrowprops={"arrowstyle": "->"},
    )
    _label_line_plot(
        axes,
        "training step t",
        "learning rate",
        "Noam schedule: lr = d^-0.5 * min(t^-0.5, t * w^-1.5)",
    )
    return figure


def warmup_figure(steps: int = 18000, beta2: float = 0.999, tau: int = 4000):
    """Warmup factors (linear / exponential with ``tau``, untuned ones) and RAdam's ``r_t``."""
    t = list(range(1, steps + 1))
    curves = {
        f"linear, min(1, t/tau), tau={tau}": [linear_warmup(s, tau) for s in t],
        f"exponential, 1-exp(-t/tau), tau={tau}": [exponential_warmup(s, tau) for s in t],
        "untuned exponential, 1-exp(-(1-b2) t)": [untuned_exponential_warmup(s, beta2) for s in t],
        "untuned linear, min(1, (1-b2) t / 2)": [untuned_linear_warmup(s, beta2) for s in t],
        "RAdam rectification r_t": [radam_rectification(s, beta2) for s in t],
    }
    figure = _figure("warmup")
    axes = figure.add_subplot()
    for (label, values), style in zip(curves.items(), ("-", "-", "--", "--", ":"), strict=True):
        axes.plot(t, values, linestyle=style, linewidth=2, label=label)
    _label_line_plot(
        axes,
        "training step t",
        "factor multiplying the learning rate",
        f"Warmup factors (Ma & Yarats) and RAdam rectification, beta2={beta2}",
        legend_loc="lower right",
    )
    axes.set_ylim(-0.02, 1.05)
    return figure


def sigmoid_figure(limit: float = 8.0):
    """``sigma(x) = 1 / (1 + e^-x)`` and its derivative ``sigma(x) (1 - sigma(x))``."""
    import torch

    x = torch.linspace(-limit, limit, 801, dtype=torch.float64)
    s = torch.sigmoid(x)
    figure = _figure("sigmoid")
    axes = figure.add_subplot()
    axes.plot(x.numpy(), s.numpy(), label="sigma(x) = 1 / (1 + exp(-x))")
    axes.plot(x.numpy(), (s * (1 - s)).numpy(), label="sigma'(x) = sigma(x)(1 - sigma(x))")
    axes.axhline(0.0, color="grey", linewidth=0.8)
    _label_line_plot(axes, "x", "value", "Sigmoid and its derivative")
    return figure


def scores_figure(num_keys: int = 10, dim: int = 2, seed: int = 0):
    """One bar chart per score in ``SCORES``: weights over the same keys for the same query."""
    import torch

    # torch and transformers (5-7 s): the schedule plots need neither
    from ..models.attention import SCORES, attend, build_score

    params = {"location": {"max_length": num_keys}}
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        keys = torch.randn(num_keys, dim, dtype=torch.float64)
        query = keys[3:4] + 0.3 * torch.randn(1, dim, dtype=torch.float64)
        weights = {}
        for name in SCORES:
            score = build_score(name, dim, dim, **params.get(name, {})).double()
            with torch.no_grad():
                _, alpha = attend(query, keys, keys, score)
            weights[name] = (alpha[0].numpy(), score.default_distribution)
    figure = _figure("scores")
    columns = 6
    rows = -(-len(weights) // columns)
    grid = figure.subplots(rows, columns, sharex=True, sharey=True)
    for axes, (name, (alpha, distribution)) in zip(grid.flat, weights.items(), strict=False):
        axes.bar(range(num_keys), alpha, color="tab:blue")
        axes.set_title(f"{name} ({distribution})", fontsize=9)
        axes.set_ylim(0, 1)
        axes.set_xticks(range(num_keys))
    for axes in grid.flat[len(weights) :]:
        axes.set_visible(False)
    for axes in grid[-1]:
        axes.set_xlabel("key j")
    for axes in grid[:, 0]:
        axes.set_ylabel("weight alpha_j")
    figure.suptitle(
        f"Attention weights of one query over {num_keys} keys (d={dim}; key 3 is the nearest "
        "neighbour of the query by construction)"
    )
    return figure


def attention_figure(
    model_dir: str,
    text: str,
    num_beams: int | None = None,
    layer: int | None = None,
    head: int | None = None,
    *,
    loader: Callable[[str], tuple] | None = None,
):
    """Alignment heatmap of a seq2seq model folder translating ``text``: source tokens on x,
    output tokens on y, cell = the cross-attention weight of decoder ``layer`` (1-based,
    default the last) and ``head`` (1-based, default the mean over heads); see
    :func:`hfattn.tasks.translation.inference.cross_attention_maps`. A model with a single
    attention over the source (Bahdanau) has one layer and one head. The translation is decoded
    with the model's saved generation settings, ``num_beams`` overriding its beam width.

    ``loader(model_dir)`` returns ``(model, tokenizer)``; ``hfattn plot`` passes the commands'
    own loader (:func:`hfattn.commands.model_loading.load_model_and_tokenizer`), which refuses a
    missing folder or a damaged file in one line. Default: the ``transformers`` Auto classes."""
    # torch and transformers (5-7 s): the schedule plots need neither
    from hfattn.tasks.translation.inference import cross_attention_maps, select_attention

    model, tokenizer = (loader or _load_seq2seq)(model_dir)
    source, output, maps = cross_attention_maps(model, tokenizer, text, num_beams=num_beams)
    weights = select_attention(maps, layer, head)
    return alignment_figure(
        source, output, weights, title=attention_title(*maps.shape[:2], layer, head)
    )


def _load_seq2seq(model_dir: str) -> tuple:
    """``(model, tokenizer)`` of a seq2seq model folder or Hub id, through the Auto classes."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    import hfattn.models  # noqa: F401  (registers the model types; torch: imported on use)

    return AutoModelForSeq2SeqLM.from_pretrained(model_dir), AutoTokenizer.from_pretrained(
        model_dir
    )


def attention_title(
    num_layers: int, num_heads: int, layer: int | None = None, head: int | None = None
) -> str:
    """Title of an alignment heatmap: which layer and head(s) it shows, when there is a choice."""
    if (num_layers, num_heads) == (1, 1):
        return "Attention alignment"
    heads = f"mean over {num_heads} heads" if head is None else f"head {head} of {num_heads}"
    return f"Cross-attention, layer {layer or num_layers} of {num_layers}, {heads}"


def alignment_figure(source_tokens, output_tokens, weights, title: str = "Attention alignment"):
    """Heatmap of ``weights`` [output, source] with the tokens as tick labels."""
    width = min(4.0 + 0.45 * len(source_tokens), 24.0)
    height = min(3.0 + 0.35 * len(output_tokens), 24.0)
    FIGURE_SIZES["attention"] = (width, height)
    figure = _figure("attention")
    axes = figure.add_subplot()
    image = axes.imshow(weights, cmap="viridis", vmin=0.0, aspect="auto", interpolation="nearest")
    axes.set_xticks(range(len(source_tokens)), source_tokens, rotation=60, ha="right")
    axes.set_yticks(range(len(output_tokens)), output_tokens)
    axes.set_xlabel("source token")
    axes.set_ylabel("output token")
    axes.set_title(title)
    figure.colorbar(image, ax=axes, label="attention weight")
    return figure


PLOTS: dict[str, Callable] = {
    "positional-encoding": positional_encoding_figure,
    "noam": noam_figure,
    "warmup": warmup_figure,
    "sigmoid": sigmoid_figure,
    "scores": scores_figure,
}
"""The method figures by name; each builder takes no argument and returns a ``Figure``."""

MODEL_PLOTS: dict[str, Callable] = {"attention": attention_figure}
"""Figures of a trained model: the builder takes the model folder and an input."""


def plot(name: str, out_path: str | os.PathLike, **params) -> Path:
    """Draw the figure ``name`` (one of :data:`PLOTS`, with its ``params``) and write it to
    ``out_path`` as PNG.

    The PNG is written to a temporary file in the same folder and renamed into place, so
    ``out_path`` is never left half-written. Returns the path written.
    """
    builders = {**PLOTS, **MODEL_PLOTS}
    if name not in builders:
        raise ValueError(f"unknown plot {name!r}; valid names: {', '.join(builders)}")
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    figure = builders[name](**params)
    with atomic_path(out_path) as tmp:
        figure.savefig(tmp, format="png", dpi=DPI)
    return out_path


def _label_line_plot(axes, xlabel: str, ylabel: str, title: str, legend_loc: str = "best") -> None:
    """Axis labels, title, legend and a light grid: the frame of every line plot here."""
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    axes.legend(loc=legend_loc)
    axes.grid(alpha=0.3)
