"""Check that a saved seq2seq folder generates the same in an environment without hfattn."""

from __future__ import annotations

import json
from pathlib import Path

import torch

LOAD_SEQ2SEQ = """
import importlib.util, json, sys, torch
assert importlib.util.find_spec("hfattn") is None, "hfattn must not be importable here"
from transformers import AutoModelForSeq2SeqLM
model = AutoModelForSeq2SeqLM.from_pretrained(sys.argv[1], trust_remote_code=True).eval()
ids = torch.tensor(json.loads(sys.argv[2]))
mask = (ids != 0).long()
greedy = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=8, do_sample=False)
beam = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=8, num_beams=3)
print(json.dumps({"module": type(model).__module__, "greedy": greedy.tolist(),
                  "beam": beam.tolist()}))
"""


def assert_same_generations_without_hfattn(
    fresh_python: Path, model, folder: Path, ids: torch.Tensor, mask: torch.Tensor
) -> None:
    """``folder`` (saved from ``model``) loaded with ``trust_remote_code`` by ``fresh_python``
    gives the greedy and beam-3 outputs ``model`` gives here (``ids`` padded with 0)."""
    from tests.helpers.fresh_env import run_offline_without_hfattn

    with torch.no_grad():
        greedy = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=8)
        beam = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=8, num_beams=3)
    loaded = run_offline_without_hfattn(
        fresh_python, LOAD_SEQ2SEQ, str(folder), json.dumps(ids.tolist()), cwd=folder.parent
    )
    assert loaded["module"].startswith("transformers_modules")
    assert loaded["greedy"] == greedy.tolist() and loaded["beam"] == beam.tolist()
