"""Build small but real "training run" folders of the char-RNN for the publishing tests.

A run folder is what ``hfattn train`` leaves behind: the saved model + tokenizer (with the
modeling source and ``auto_map``), ``recipe.yaml``, ``eval_results.json`` (measured here on
held-out text), ``metrics.jsonl``, ``loss_curve.png`` and a ``checkpoints/`` folder that must
never be published. Training is a plain torch loop of a few steps.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import torch
import yaml

TEXT = """ROMEO:
But, soft! what light through yonder window breaks?
It is the east, and Juliet is the sun.
Arise, fair sun, and kill the envious moon,
Who is already sick and pale with grief.

JULIET:
O Romeo, Romeo! wherefore art thou Romeo?
Deny thy father and refuse thy name;
Or, if thou wilt not, be but sworn my love,
And I'll no longer be a Capulet.

ROMEO:
Shall I hear more, or shall I speak at this?

JULIET:
'Tis but thy name that is my enemy;
Thou art thyself, though not a Montague.
What's in a name? that which we call a rose
By any other name would smell as sweet.
"""

HELD_OUT = """ROMEO:
I take thee at thy word:
Call me but love, and I'll be new baptized.
"""

# A 1x1 PNG: the loss curve's bytes do not matter to the publishing code.
PNG_1x1 = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


def _loss(model, ids: torch.Tensor) -> float:
    with torch.no_grad():
        return float(model(input_ids=ids[None, :-1], labels=ids[None, :-1]).loss)


def build_char_rnn_run(
    out: Path,
    *,
    embedding_dim: int = 16,
    hidden_size: int = 32,
    steps: int = 40,
    seed: int = 0,
    with_results: bool = True,
) -> Path:
    """Train a tiny GRU char-RNN on :data:`TEXT` for ``steps`` Adam steps and save a run folder."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: extra threads only spin against each other
    try:
        return _train_and_save(out, embedding_dim, hidden_size, steps, seed, with_results)
    finally:
        torch.set_num_threads(threads)


def _train_and_save(out, embedding_dim, hidden_size, steps, seed, with_results) -> Path:
    import hfattn
    from hfattn import CharRNNConfig, CharRNNForCausalLM
    from hfattn.tokenization import build_char_tokenizer

    torch.manual_seed(seed)
    tokenizer = build_char_tokenizer(TEXT, held_out=[HELD_OUT])
    config = CharRNNConfig(
        vocab_size=len(tokenizer), embedding_dim=embedding_dim, hidden_size=hidden_size, cell="gru"
    )
    model = CharRNNForCausalLM(config)
    ids = torch.tensor(tokenizer(TEXT, add_special_tokens=False).input_ids)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    start, metrics = time.perf_counter(), []
    for step in range(steps):
        offsets = torch.randint(0, len(ids) - 65, (8,))
        batch = torch.stack([ids[o : o + 64] for o in offsets])
        loss = model(input_ids=batch, labels=batch).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        metrics.append({"step": step + 1, "train_loss": round(loss.item(), 4)})
    model.eval()
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    recipe = {
        "name": "char_rnn_tiny_test",
        "model": {
            "type": "char-rnn",
            **{k: getattr(config, k) for k in ("embedding_dim", "hidden_size", "cell")},
        },
        "training": {
            "steps": steps,
            "batch_size": 8,
            "seq_len": 64,
            "optimizer": "adam",
            "lr": 0.01,
        },
        "generation": {"prompt": "ROMEO:"},
        "hub": {
            "push_to_hub": False,
            "repo_id": None,
            "private": False,
            "space": False,
            "license": "mit",
            "language": ["en"],
            "tags": ["shakespeare", "tiny"],
            "datasets": [],
            "base_model": None,
        },
    }
    (out / "recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False))
    (out / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    (out / "loss_curve.png").write_bytes(PNG_1x1)
    (out / "checkpoints" / "step_20").mkdir(parents=True, exist_ok=True)
    (out / "checkpoints" / "step_20" / "optimizer.bin").write_bytes(b"\0" * 64)
    if with_results:
        held = torch.tensor(tokenizer(HELD_OUT, add_special_tokens=False).input_ids)
        loss = _loss(model, held)
        results = {
            "task_type": "text-generation",
            "task_name": "Causal language modeling",
            "dataset_name": "Romeo and Juliet (excerpt)",
            "dataset_type": "romeo-juliet-excerpt",
            "results": [
                {
                    "split": "test",
                    "metric_type": "perplexity",
                    "metric_name": "Perplexity",
                    "value": round(math.exp(loss), 4),
                },
                {
                    "split": "test",
                    "metric_type": "loss",
                    "metric_name": "Loss (nats/char)",
                    "value": round(loss, 4),
                },
            ],
            "training": {
                "recipe": "char_rnn_tiny_test",
                "global_step": steps,
                "train_runtime_s": round(time.perf_counter() - start, 2),
                "hardware": "2-core CPU",
                "num_processes": 1,
                "mixed_precision": "no",
            },
        }
        (out / "eval_results.json").write_text(json.dumps(results, indent=2))
    assert hfattn  # imported for its registrations (save_pretrained writes auto_map)
    return out


def greedy_and_sampled(model, tokenizer, prompt: str = "ROMEO:", n: int = 40) -> dict[str, str]:
    """A greedy and a seeded sampled continuation of ``prompt`` (the fresh-env check compares them)."""
    ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False).input_ids
    greedy = model.generate(ids, max_new_tokens=n, do_sample=False)
    torch.manual_seed(1234)
    sampled = model.generate(ids, max_new_tokens=n, do_sample=True, temperature=0.9, top_k=20)
    return {"greedy": tokenizer.decode(greedy[0]), "sampled": tokenizer.decode(sampled[0])}
