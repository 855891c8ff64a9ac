"""Speed of the Bahdanau/Luong encoder-decoder against straightforward implementations.

    .venv/bin/python -m benchmarks.bench_bahdanau [--repeats 3 | --quick] [--device cpu|cuda]
        [--json PATH]

Géron-sized model (Embedding 128, BiLSTM 256 → LSTM 512, vocabulary 1000), one CPU thread,
ratios measured in the same process:

1. Teacher-forced training (forward + backward) tokens/s of the model vs a per-step
   implementation of the *same* model written here: every step runs the RNN on one token,
   re-projects the keys inside the score, and applies the output layer and the loss on that
   step alone. The model projects the keys once per source, runs the whole target through the
   RNN in one call where the variant allows it (no attention, Luong without input feeding)
   and applies the output layer and loss once over all steps.
2. Beam search (width 5) over a batch of 32 sources vs the same sources one at a time.
3. Greedy decoding with the recurrent-state cache vs ``use_cache=False`` (which re-runs
   the decoder over every previous token at each step).

Prints a markdown table (measure, hfattn, reference, ratio, target). Targets: training ≥ 2×
the per-step loop for Bahdanau and for Luong; batched beam search ≥ 5× one at a time.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.nn import functional as F

from benchmarks.lib.benchlib import BenchReport, add_device_argument, add_json_argument, synchronize
from hfattn import BahdanauConfig, BahdanauForConditionalGeneration
from hfattn.models.modeling_bahdanau import shift_tokens_right

VOCAB, SRC_LEN, TGT_LEN, BATCH = 1000, 20, 20, 32
TRAIN_TARGET, BEAM_TARGET = 2.0, 5.0
DEVICE = "cpu"
"""Where models and batches go (``--device``)."""


def make_model(**overrides) -> BahdanauForConditionalGeneration:
    torch.manual_seed(0)
    config = BahdanauConfig.from_preset("geron", vocab_size=VOCAB, **overrides)
    return BahdanauForConditionalGeneration(config).to(DEVICE)


def make_batch(batch: int = BATCH, seed: int = 0):
    """Right-padded sources of 12–20 tokens, targets of TGT_LEN tokens (last = EOS)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(12, SRC_LEN + 1, (batch,), generator=g)
    lengths[0] = SRC_LEN
    ids = torch.randint(4, VOCAB, (batch, SRC_LEN), generator=g)
    mask = (torch.arange(SRC_LEN)[None] < lengths[:, None]).long()
    ids = ids * mask
    labels = torch.randint(4, VOCAB, (batch, TGT_LEN), generator=g)
    labels[:, -1] = 3
    return ids.to(DEVICE), mask.to(DEVICE), labels.to(DEVICE)


def per_step_loss(model, ids, mask, labels, fused_cell: bool = False) -> torch.Tensor:
    """The same model, step by step: keys projected again at every step, output layer and
    cross-entropy per step; the RNN step is each layer's ``nn.LSTM`` kernel on one token, or with
    ``fused_cell``
    the model's own per-token kernel (``torch.lstm_cell``), which isolates the gain of the
    precomputed keys and of the one-pass parts."""
    config = model.config
    encoded = model.model.encoder(input_ids=ids, attention_mask=mask)
    decoder = model.model.decoder
    annotations = encoded.last_hidden_state
    keep = mask[:, None].bool()
    h = encoded.decoder_initial_hidden.transpose(0, 1).contiguous()
    state = (h, encoded.decoder_initial_cell.transpose(0, 1).contiguous())
    inputs = shift_tokens_right(labels, config.pad_token_id, config.decoder_start_token_id)
    total = 0.0

    def rnn(x, state):
        if not fused_cell:  # the sequence kernel of every layer, on one token
            outputs, final = decoder._one_pass(x, state)
            return outputs[-1], final
        out, layers = decoder._step(x[:, 0], decoder._unstack(state))
        return out[:, None], decoder._restack(layers)

    for t in range(inputs.shape[1]):
        x = decoder.embed_tokens(inputs[:, t : t + 1])
        if config.attention == "bahdanau":
            query = state[0][-1][:, None]
            context, _ = decoder.attention(query, annotations, annotations, keep)
            out, state = rnn(torch.cat([x, context], -1), state)
            readout = torch.cat([out, context], -1)
        elif config.attention == "luong":
            out, state = rnn(x, state)
            context, _ = decoder.attention(out, annotations, annotations, keep)
            readout = torch.tanh(decoder.combine(torch.cat([context, out], -1)))
        else:
            readout, state = rnn(x, state)
        logits = model.lm_head(readout[:, 0])
        total = total + F.cross_entropy(logits, labels[:, t], ignore_index=-100, reduction="sum")
    return total / (labels != -100).sum()


def best_time(fn, repeats: int) -> float:
    """Minimum wall time of ``fn()`` over ``repeats`` runs (after one warm-up run)."""
    fn()
    times = []
    for _ in range(repeats):
        synchronize(DEVICE)
        start = time.perf_counter()
        fn()
        synchronize(DEVICE)
        times.append(time.perf_counter() - start)
    return min(times)


def training_speed(
    attention: str | None, score: str | None, repeats: int
) -> tuple[float, float, float]:
    """Teacher-forced training tokens/s of the model and of the per-step implementation
    (with ``nn.LSTM`` steps, and with the fused cell)."""
    model = make_model(attention=attention, score=score).train()
    ids, mask, labels = make_batch()
    model_loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
    torch.testing.assert_close(per_step_loss(model, ids, mask, labels), model_loss)
    torch.testing.assert_close(per_step_loss(model, ids, mask, labels, True), model_loss)

    def step(loss_fn):
        model.zero_grad(set_to_none=True)
        loss_fn().backward()

    fast = best_time(
        lambda: step(lambda: model(input_ids=ids, attention_mask=mask, labels=labels).loss),
        repeats,
    )
    slow = best_time(lambda: step(lambda: per_step_loss(model, ids, mask, labels)), repeats)
    fused = best_time(lambda: step(lambda: per_step_loss(model, ids, mask, labels, True)), repeats)
    tokens = labels.numel()
    return tokens / fast, tokens / slow, tokens / fused


@torch.no_grad()
def beam_speed(repeats: int, sentences: int) -> tuple[float, float]:
    """Sentences/s of beam search (width 5) on a batch vs one sentence at a time."""
    model = make_model().eval()
    ids, mask, _ = make_batch(sentences)
    kwargs = dict(num_beams=5, max_new_tokens=TGT_LEN, min_new_tokens=TGT_LEN)
    batched = best_time(
        lambda: model.generate(input_ids=ids, attention_mask=mask, **kwargs), repeats
    )

    def one_by_one():
        for i in range(sentences):
            n = int(mask[i].sum())
            model.generate(input_ids=ids[i : i + 1, :n], **kwargs)

    single = best_time(one_by_one, max(1, repeats // 2))
    return sentences / batched, sentences / single


@torch.no_grad()
def cache_speed(repeats: int) -> tuple[float, float]:
    """Generated tokens/s of greedy decoding with and without the recurrent-state cache."""
    model = make_model().eval()
    ids, mask, _ = make_batch()
    kwargs = dict(do_sample=False, max_new_tokens=TGT_LEN, min_new_tokens=TGT_LEN)
    out = model.generate(input_ids=ids, attention_mask=mask, **kwargs)
    assert torch.equal(
        out, model.generate(input_ids=ids, attention_mask=mask, use_cache=False, **kwargs)
    )
    cached = best_time(
        lambda: model.generate(input_ids=ids, attention_mask=mask, **kwargs), repeats
    )
    uncached = best_time(
        lambda: model.generate(input_ids=ids, attention_mask=mask, use_cache=False, **kwargs),
        repeats,
    )
    tokens = ids.shape[0] * TGT_LEN
    return tokens / cached, tokens / uncached


def measure(repeats: int) -> list[tuple[str, str, str, float, float | None]]:
    """Every row: (measure, hfattn figure, reference figure, ratio, target or None)."""
    rows = []
    for label, attention, score, target in (
        ("Bahdanau (additive)", "bahdanau", "additive", TRAIN_TARGET),
        ("Luong general, no input feeding", "luong", "general", TRAIN_TARGET),
        ("no attention", None, None, None),
    ):
        fast, slow, fused = training_speed(attention, score, repeats)
        name = f"teacher-forced training tokens/s, {label}"
        rows.append((name, f"{fast:,.0f}", f"{slow:,.0f} (per-step)", fast / slow, target))
        rows.append(
            (
                f"{name}, against the fused-cell per-step loop",
                f"{fast:,.0f}",
                f"{fused:,.0f} (per-step, fused cell)",
                fast / fused,
                None,
            )
        )
    fast, slow = beam_speed(repeats, sentences=BATCH)
    rows.append(
        (
            f"beam search width 5, sentences/s: batch {BATCH} vs one at a time",
            f"{fast:,.1f} (batch {BATCH})",
            f"{slow:,.1f} (one at a time)",
            fast / slow,
            BEAM_TARGET,
        )
    )
    fast, slow = cache_speed(repeats)
    rows.append(
        (
            f"greedy tokens/s, batch {BATCH}: state cache vs use_cache=False",
            f"{fast:,.0f} (cache)",
            f"{slow:,.0f} (use_cache=False)",
            fast / slow,
            None,
        )
    )
    return rows


def main() -> None:
    global DEVICE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--repeats", type=int, default=3, help="timed runs per measure; the best one counts"
    )
    parser.add_argument("--quick", action="store_true", help="one repeat (a smoke run)")
    add_device_argument(parser)
    add_json_argument(parser)
    args = parser.parse_args()
    DEVICE = args.device
    torch.set_num_threads(1)
    repeats = 1 if args.quick else args.repeats
    rows = measure(repeats)

    print(
        f"Géron-sized model (Embedding 128, BiLSTM 256 → LSTM 512, vocab {VOCAB}), batch {BATCH},"
        f" source ≤ {SRC_LEN}, target {TGT_LEN}, {torch.get_num_threads()} thread, torch {torch.__version__},"
        f" {DEVICE}\n"
    )
    print("| measure | hfattn | reference | ratio | target |")
    print("|---|---:|---:|---:|---:|")
    report = BenchReport("bahdanau", DEVICE)
    for name, fast, slow, ratio, target in rows:
        print(f"| {name} | {fast} | {slow} | {ratio:.2f}× | {f'≥ {target:g}×' if target else ''} |")
        report.add(name, ratio, "x", target, detail=f"{fast} vs {slow}")
    report.write(args.json)


if __name__ == "__main__":
    main()
