"""The two probes behind the training-speed notes: ``bench_gru_recurrence.py`` (a GRU with a
hand-written backward, which must be ``nn.GRU`` exactly) and ``bench_recipe_steps.py`` (recipe
variants' steps timed in turn)."""

from __future__ import annotations

import json

import torch
from torch import nn

from benchmarks import bench_recipe_steps
from benchmarks.bench_gru_recurrence import scan_gru
from tests.helpers.recipe_helpers import write_recipe


def test_the_hand_written_gru_is_nn_gru_forward_and_backward():
    torch.manual_seed(0)
    gru = nn.GRU(3, 6, batch_first=True).double()
    x = torch.randn(4, 5, 3, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(1, 4, 6, dtype=torch.float64, requires_grad=True)
    d_out = torch.randn(4, 5, 6, dtype=torch.float64)
    wrt = [x, h0, *gru.parameters()]
    expected_out = gru(x, h0)[0]
    expected = torch.autograd.grad((expected_out * d_out).sum(), wrt)
    got_out = scan_gru(gru, x, h0)
    got = torch.autograd.grad((got_out * d_out).sum(), wrt)
    torch.testing.assert_close(got_out, expected_out, rtol=0, atol=1e-12)
    for name, a, b in zip(["x", "h0", *dict(gru.named_parameters())], got, expected, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12, msg=name)


def test_recipe_variants_are_timed_in_turn_and_reported(tmp_path, capsys):
    recipe = write_recipe(tmp_path, training={"batch_size": 4, "seq_len": 16})
    out = tmp_path / "steps.json"
    bench_recipe_steps.main(
        [str(recipe), "--variant", "small=", "--variant", "wide=model.hidden_size=64",
         "--rounds", "3", "--warmup", "1", "--json", str(out)]
    )  # fmt: skip
    report = json.loads(out.read_text())
    values = {r["name"]: r["value"] for r in report["records"]}
    assert values["rows/s relative to small: small"] == 1.0
    assert values["rows/s relative to small: wide"] > 0
    table = [line for line in report["markdown"] if line.startswith("| small |")]
    assert len(table) == 1 and table[0].split("|")[5].strip() == "16.0"  # tokens a row
    assert "| wide |" in capsys.readouterr().out
