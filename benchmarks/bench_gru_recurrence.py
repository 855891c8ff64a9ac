"""Does a hand-written GRU backward beat ``nn.GRU``'s on the CPU?

PyTorch's CPU GRU records one ``addmm`` per time step, so its backward pass also computes the
recurrent weight gradient one small product per step. :class:`GRUScan` steps the recurrence
itself, keeps the gates, and in the backward pass computes the gradient of the state step by
step (one product per step, it cannot be avoided) but the weight gradient as **one** product
over all steps: ``dW_hh = Σ_t dg_t^T h_{t-1}``. The GRU is that of ``nn.GRU``:

    r_t = σ(W_ir x_t + b_ir + W_hr h_{t-1} + b_hr)
    z_t = σ(W_iz x_t + b_iz + W_hz h_{t-1} + b_hz)
    n_t = tanh(W_in x_t + b_in + r_t ⊙ (W_hn h_{t-1} + b_hn))
    h_t = (1 − z_t) ⊙ n_t + z_t ⊙ h_{t-1}

The script checks that both give the same outputs and gradients, then times forward + backward
of both, interleaved, at the shapes of the char-RNN recipe (64 streams × 64 characters, GRU
512 over embeddings of 64) and of the Luong Bible recipe (32 verses × 30 tokens: the decoder's
GRU 512 and one direction of the encoder's GRU 256, over embeddings of 256).

Usage::

    .venv/bin/python -m benchmarks.bench_gru_recurrence [--repeats 15 | --quick] [--json PATH]

The speed-ups (``nn.GRU`` time / :class:`GRUScan` time) are findings, not targets; the
gradients of the two must agree to 1e-3.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn
from torch.nn import functional as F

from benchmarks.lib.benchlib import BenchReport, add_json_argument

SHAPES = {  # name: (batch, steps, input size, hidden size)
    "char-RNN (64 x 64, GRU 512)": (64, 64, 64, 512),
    "Luong decoder (32 x 30, GRU 512)": (32, 30, 256, 512),
    "Luong encoder, one direction (32 x 30, GRU 256)": (32, 30, 256, 256),
}


class GRUScan(torch.autograd.Function):
    """The GRU recurrence over precomputed input projections ``gi [T, B, 3H]`` from ``h0``,
    with the weight gradient of the backward pass as one product over all steps."""

    @staticmethod
    def forward(ctx, gi, h0, w_hh, b_hh):
        steps, batch, hidden = gi.shape[0], gi.shape[1], h0.shape[1]
        outputs, r, z, n, h_n = (gi.new_empty(steps, batch, hidden) for _ in range(5))
        h = h0
        for t in range(steps):
            gh = torch.addmm(b_hh, h, w_hh.t())
            i_r, i_z, i_n = gi[t].chunk(3, 1)
            g_r, g_z, g_n = gh.chunk(3, 1)
            torch.sigmoid(i_r + g_r, out=r[t])
            torch.sigmoid(i_z + g_z, out=z[t])
            torch.tanh(torch.addcmul(i_n, r[t], g_n), out=n[t])
            h_n[t] = g_n
            h = torch.lerp(n[t], h, z[t])
            outputs[t] = h
        ctx.save_for_backward(h0, w_hh, outputs, r, z, n, h_n)
        return outputs

    @staticmethod
    def backward(ctx, d_outputs):
        h0, w_hh, outputs, r, z, n, h_n = ctx.saved_tensors
        steps, batch, hidden = outputs.shape
        h_prev = torch.cat((h0[None], outputs[:-1]), 0)
        d_n_pre = (1 - z) * (1 - n * n)  # ∂h_t/∂(pre-activation of n_t), per unit of dh_t
        d_z_pre = (h_prev - n) * z * (1 - z)
        d_r_pre = d_n_pre * h_n * r * (1 - r)
        d_gh_factor = torch.cat((d_r_pre, d_z_pre, d_n_pre * r), 2)
        d_gh = torch.empty_like(d_gh_factor)
        d_h_all = torch.empty_like(outputs)
        d_h = d_outputs.new_zeros(batch, hidden)
        for t in range(steps - 1, -1, -1):
            d_h = d_h + d_outputs[t]
            d_h_all[t] = d_h
            torch.mul(d_h.repeat(1, 3), d_gh_factor[t], out=d_gh[t])
            d_h = torch.addmm(d_h * z[t], d_gh[t], w_hh)
        d_gi = d_h_all.repeat(1, 1, 3) * torch.cat((d_r_pre, d_z_pre, d_n_pre), 2)
        d_gh = d_gh.reshape(steps * batch, 3 * hidden)
        d_w_hh = d_gh.t() @ h_prev.reshape(steps * batch, hidden)
        return d_gi, d_h, d_w_hh, d_gh.sum(0)


def scan_gru(gru: nn.GRU, x: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
    """``gru``'s outputs for batch-first ``x`` from ``h0 [1, B, H]``, through :class:`GRUScan`."""
    gi = F.linear(x, gru.weight_ih_l0, gru.bias_ih_l0).transpose(0, 1).contiguous()
    return GRUScan.apply(gi, h0[0], gru.weight_hh_l0, gru.bias_hh_l0).transpose(0, 1)


def compare(
    batch: int, steps: int, inputs: int, hidden: int, *, repeats: int
) -> tuple[dict[str, float], float]:
    """Forward + backward of ``nn.GRU`` and :class:`GRUScan` at one shape, interleaved:
    the median milliseconds of each, and the largest difference between their gradients."""
    gru = nn.GRU(inputs, hidden, batch_first=True)
    x = torch.randn(batch, steps, inputs, requires_grad=True)
    h0 = torch.zeros(1, batch, hidden)
    d_out = torch.randn(batch, steps, hidden)
    runs = {"nn.GRU": lambda: gru(x, h0)[0], "GRUScan": lambda: scan_gru(gru, x, h0)}
    wrt = [x, *gru.parameters()]
    grads = {k: torch.autograd.grad((f() * d_out).sum(), wrt) for k, f in runs.items()}
    error = max((a - b).abs().max().item() for a, b in zip(*grads.values(), strict=True))
    times = {k: [] for k in runs}
    for _ in range(repeats):
        for k, f in runs.items():
            start = time.perf_counter()
            (f() * d_out).sum().backward()
            times[k].append(time.perf_counter() - start)
    return {k: statistics.median(v) * 1000 for k, v in times.items()}, error


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="5 repeats")
    add_json_argument(parser)
    args = parser.parse_args()
    repeats = 5 if args.quick else args.repeats
    torch.manual_seed(0)
    report = BenchReport("gru_recurrence")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, median of {repeats}")
    for name, shape in SHAPES.items():
        ms, error = compare(*shape, repeats=repeats)
        speed_up = ms["nn.GRU"] / ms["GRUScan"]
        detail = f"nn.GRU {ms['nn.GRU']:.1f} ms vs GRUScan {ms['GRUScan']:.1f} ms"
        report.add(f"GRUScan speed-up, {name}", speed_up, "x", detail=detail)
        report.add(f"largest gradient difference, {name}", error, "", 1e-3, "<=")
        print(f"{name}: {detail}, speed-up {speed_up:.3f}x (gradients agree to {error:.1e})")
    report.write(args.json)


if __name__ == "__main__":
    main()
