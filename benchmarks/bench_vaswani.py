"""Speed and memory of the Vaswani Transformer against transformers' ``MarianMTModel`` of the
same size, and of its KV cache against ``use_cache=False``.

    .venv/bin/python -m benchmarks.bench_vaswani [--device cpu|cuda] [--dtype fp32|bf16]
        [--out results.json] [--json PATH] [--quick]

The reference is ``transformers.MarianMTModel`` configured to the *same* network: the same
layers, d_model, heads, FFN size and vocabulary, post-LN, static sinusoidal positions, ReLU
(``activation_function="relu"``), embeddings × √d, one embedding matrix shared by encoder,
decoder and output layer, dropout 0.1 on the residuals and the embeddings (0 on attention
weights and inside the FFN, in both), ``attn_implementation="sdpa"`` in both. The Marian model
gets a copy of the hfattn weights (and of its sinusoidal table), and the script checks that the
two compute the same logits before timing anything: both sides do the same work. Everything
runs in one process; the two models alternate step by step (the order flips every step), the
first steps are discarded as warm-up, and each figure is a median, so that a load on the
machine (another training run) falls on both sides alike.

1. Training: target tokens/s of one step (forward, backward, AdamW step) on right-padded
   sources (lengths drawn in [S/2, S]) and full-length targets, at a small size (3+3 layers,
   d 256, 4 heads, FFN 1024, vocab 8000, batch 64 × 32 → 32) and at the paper's base size
   (6+6 layers, d 512, 8 heads, FFN 2048) at a smaller batch. Memory: the bytes of the
   tensors that autograd saves for the backward pass, counted once per storage and without the
   parameters (``torch.autograd.graph.saved_tensors_hooks``): a deterministic per-step
   activation-memory measure. On CUDA also the peak of ``torch.cuda.max_memory_allocated``
   during a step above the memory held before it (weights, gradients, optimizer state). The
   MFU: FLOPs / step time / peak, with the FLOPs and the peak of
   :mod:`hfattn.training.throughput` (what ``hfattn train`` reports): FLOPs = 6 × (encoder
   layer parameters × source tokens + decoder layer and output-layer parameters × target
   tokens, cross-attention key/value projections × source tokens) + 12 × B × h·d_k × (per layer
   S² (encoder), T² + T·S (decoder)), padded positions included and causal attention counted
   in full; the peak, the device's datasheet figure for the dtype (989 TFLOP/s for an H100 or
   H200 in bf16, dense), an 8192³ product measured on an unlisted CUDA device, and on a CPU
   the best rate of a square matrix product measured on the spot with the same threads
   (:func:`matmul_peak`). ``--engine`` trains hfattn as ``hfattn train`` does on the device:
   ``torch.compile`` (on CUDA, as ``training.compile: auto``) and AdamW fused on CUDA
   (:func:`hfattn.training.optim.adamw_kernel`); Marian always trains as transformers ships
   it: eager, ``torch.optim.AdamW`` with its defaults. On CUDA ``--base-batch`` defaults to 256
   rows (16k target tokens of 64) at the paper-base size.
2. Generation, small size, 32 sources, exactly 64 new tokens (``min_new_tokens =
   max_new_tokens = 64``), greedy and beam 4: (a) hfattn with its ``EncoderDecoderCache``
   against ``use_cache=False`` (the whole decoder re-run over the prefix at every step, the
   seeds' loop); (b) hfattn against Marian, both with the cache. Generated tokens/s counts
   batch × 64 (the returned sequences, not the beams).
3. Static cache (``--skip-static-cache`` leaves it out): one source, greedy, 64 new tokens,
   ``cache_implementation="static"`` with the decoding step compiled in one graph
   (``CompileConfig(fullgraph=True)``: transformers' ``reduce-overhead`` mode, CUDA graphs,
   on a GPU; ``mode="default"`` on a CPU) against the dynamic cache; target ≥ 2× on a GPU.

On CPU the default is one torch thread (``--threads``): with other processes on the machine,
two threads that wait for each other are slowed far more than one. Prints a markdown table
(measure, hfattn, reference, ratio, target, met) with, next to each hfattn/Marian ratio of
medians, the range of the ratios of the runs made back to back ("pairs"), then the checks
(logit difference, identical outputs), and writes every number to ``--out`` as JSON; ``--json``
writes the table's ratios against their targets (``benchmarks/lib/benchlib.py``, for
``run_all.py``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import transformers
from torch._inductor.utils import fresh_cache
from transformers import CompileConfig, GenerationConfig, MarianConfig, MarianMTModel

from benchmarks.lib.benchlib import (
    BenchReport,
    add_device_argument,
    add_json_argument,
    gpu_name,
    synchronize,
    write_atomically,
)
from hfattn import VaswaniConfig, VaswaniForConditionalGeneration
from hfattn.common.machine import provenance
from hfattn.orchestration.run import build_job
from hfattn.recipes import load_recipe
from hfattn.training.compiling import (
    compile_for_training,
    compiled_graphs,
    mark_dynamic_dims,
    resolve_compile,
)
from hfattn.training.optim import adamw_kernel, training_optimizer
from hfattn.training.precision import resolve_mixed_precision
from hfattn.training.throughput import FlopCounter, device_peak_flops, vaswani_training_flops

PAD, UNK, BOS, EOS = 0, 1, 2, 3
PARITY_TARGET, CACHE_TARGET = 1.0, 8.0
STATIC_CACHE_TARGET = 2.0
"""Static cache + compiled step / dynamic cache at batch 1, on a GPU (issue 23)."""
RECIPE_MFU_TARGET = 0.35
"""The MFU the recipe's step should reach on an H100 / H200 in bf16 (``--recipe``)."""


@dataclass(frozen=True)
class Size:
    """One model size and its training batch."""

    name: str
    layers: int
    d_model: int
    heads: int
    ffn: int
    batch: int


# --------------------------------------------------------------------------- models


def make_models(size: Size, vocab: int, max_positions: int, device: str):
    """``(hfattn, marian)`` of the same architecture, Marian holding a copy of hfattn's weights."""
    torch.manual_seed(0)
    config = VaswaniConfig(
        vocab_size=vocab,
        encoder_layers=size.layers,
        decoder_layers=size.layers,
        d_model=size.d_model,
        num_heads=size.heads,
        ffn_dim=size.ffn,
        activation="relu",
        dropout=0.1,
        attention_dropout=0.0,
        activation_dropout=0.0,
        max_position_embeddings=max_positions,
        position_embedding="sinusoidal",
        norm_position="post",
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
        label_smoothing=0.0,
        pad_token_id=PAD,
        eos_token_id=EOS,
        bos_token_id=BOS,
        decoder_start_token_id=BOS,
    )
    ours = VaswaniForConditionalGeneration._from_config(config, attn_implementation="sdpa")
    marian_config = MarianConfig(
        vocab_size=vocab,
        decoder_vocab_size=vocab,
        encoder_layers=size.layers,
        decoder_layers=size.layers,
        d_model=size.d_model,
        encoder_attention_heads=size.heads,
        decoder_attention_heads=size.heads,
        encoder_ffn_dim=size.ffn,
        decoder_ffn_dim=size.ffn,
        activation_function="relu",
        dropout=0.1,
        attention_dropout=0.0,
        activation_dropout=0.0,
        max_position_embeddings=max_positions,
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
        pad_token_id=PAD,
        eos_token_id=EOS,
        bos_token_id=BOS,
        decoder_start_token_id=BOS,
        forced_eos_token_id=None,
    )
    marian = MarianMTModel._from_config(marian_config, attn_implementation="sdpa")
    copy_weights(ours, marian)
    ours.to(device)
    marian.to(device)
    return ours, marian


def copy_weights(ours: VaswaniForConditionalGeneration, marian: MarianMTModel) -> None:
    """Load hfattn's weights into Marian (names differ only in ``o_proj``/``out_proj`` and the
    ``feed_forward.`` prefix; the shared embedding, the output bias and the position tables)."""
    source = ours.state_dict()
    target = marian.state_dict()
    mapped = {}
    for name in target:
        if name in ("model.shared.weight", "lm_head.weight") or name.endswith(
            "embed_tokens.weight"
        ):
            mapped[name] = source["model.encoder.embed_tokens.weight"]
        elif name == "final_logits_bias":
            mapped[name] = source["lm_head.bias"][None]
        elif name.endswith("embed_positions.weight"):
            stack = name.split(".")[1]
            mapped[name] = ours.model.get_submodule(stack).embed_positions.weight
        else:
            mine = name.replace("out_proj", "o_proj")
            mine = mine.replace(".fc1.", ".feed_forward.fc1.").replace(
                ".fc2.", ".feed_forward.fc2."
            )
            mapped[name] = source[mine]
    with torch.no_grad():
        for name, value in mapped.items():
            target[name].copy_(value)
    used = {
        "lm_head.bias",
        "model.encoder.embed_tokens.weight",
        "model.decoder.embed_tokens.weight",
    }
    for name in mapped:
        mine = name.replace("out_proj", "o_proj")
        used.add(mine.replace(".fc1.", ".feed_forward.fc1.").replace(".fc2.", ".feed_forward.fc2."))
    missing = [n for n in source if n not in used and "embed_positions" not in n]
    if missing:
        raise RuntimeError(f"hfattn weights with no Marian counterpart: {missing}")


def make_batch(batch: int, src_len: int, tgt_len: int, vocab: int, device: str, seed: int = 0):
    """Right-padded sources of src_len/2 … src_len tokens (the first at full length) and
    full-length targets."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(src_len // 2, src_len + 1, (batch,), generator=g)
    lengths[0] = src_len
    ids = torch.randint(4, vocab, (batch, src_len), generator=g)
    mask = (torch.arange(src_len)[None] < lengths[:, None]).long()
    labels = torch.randint(4, vocab, (batch, tgt_len), generator=g)
    labels[:, -1] = EOS
    return (ids * mask).to(device), mask.to(device), labels.to(device)


def check_same_function(ours, marian, ids, mask, labels, autocast, bf16: bool) -> float:
    """Max |logit difference| of the two models in eval mode (raises if they differ)."""
    ours.eval()
    marian.eval()
    with torch.no_grad(), autocast():
        a = ours(input_ids=ids, attention_mask=mask, labels=labels).logits.float()
        b = marian(input_ids=ids, attention_mask=mask, labels=labels).logits.float()
    diff = (a - b).abs().max().item()
    tolerance = (0.1 if bf16 else 1e-4) * max(1.0, a.abs().max().item())
    if diff > tolerance:
        raise RuntimeError(f"hfattn and Marian logits differ by {diff}: not the same network")
    return diff


# --------------------------------------------------------------------------- measuring


class SavedTensorBytes:
    """Bytes of the tensors autograd saves for backward, each storage counted once, parameters
    and buffers excluded (``torch.autograd.graph.saved_tensors_hooks``)."""

    def __init__(self, *models: torch.nn.Module):
        self.exclude = {
            t.untyped_storage().data_ptr() for m in models for t in (*m.parameters(), *m.buffers())
        }
        self.storages: dict[int, int] = {}

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in self.exclude:
            self.storages[ptr] = storage.nbytes()
        return tensor

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self._pack, lambda tensor: tensor)

    @property
    def total(self) -> int:
        return sum(self.storages.values())


def timed(device: str, fn, *args):
    """``(seconds, fn(*args))``, the device synchronised before and after."""
    synchronize(device)
    start = time.perf_counter()
    result = fn(*args)
    synchronize(device)
    return time.perf_counter() - start, result


def train_step(model, optimizer, ids, mask, labels, autocast) -> None:
    optimizer.zero_grad(set_to_none=True)
    with autocast():
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
    loss.backward()
    optimizer.step()


def step_memory(model, optimizer, ids, mask, labels, autocast, device: str) -> dict:
    """One (discarded) training step measured for memory."""
    meter = SavedTensorBytes(model)
    optimizer.zero_grad(set_to_none=True)
    if device == "cuda":
        synchronize(device)
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    with meter.hooks(), autocast():
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
    loss.backward()
    optimizer.step()
    result = {"saved_activation_bytes": meter.total}
    if device == "cuda":
        synchronize(device)
        result["cuda_peak_step_bytes"] = torch.cuda.max_memory_allocated() - before
    return result


def write_kernel_profile(path: str, device: str, step, *args, steps: int = 3) -> None:
    """The kernels of ``steps`` training steps (``torch.profiler``), most device time first:
    where a step's time goes (matrix products, attention, fused element-wise kernels, the
    optimizer), written as a text table to ``path``."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        for _ in range(steps):
            step(*args)
        synchronize(device)
    sort_by = "self_cuda_time_total" if device == "cuda" else "self_cpu_time_total"
    table = prof.key_averages().table(sort_by=sort_by, row_limit=50, max_name_column_width=90)
    write_atomically(path, f"{steps} steps\n{table}\n")


def matmul_peak(device: str, dtype: str) -> tuple[float, str]:
    """``(FLOP/s, description)``: the peak that the MFU divides by.

    On CUDA, :func:`hfattn.training.throughput.device_peak_flops` (the datasheet's dense
    figure, or a measured 8192³ product). On a CPU: the best of a few square matrix products
    (n = 1024, 2048) in ``dtype`` with the current threads, ``2 n³ / time``; this is what the
    matmul library reaches on this machine, not a datasheet figure."""
    if device == "cuda":
        return device_peak_flops(device, dtype)
    torch_dtype = torch.bfloat16 if dtype == "bf16" else torch.float32
    best = 0.0
    for n in (1024, 2048):
        a = torch.randn(n, n, device=device, dtype=torch_dtype)
        b = torch.randn(n, n, device=device, dtype=torch_dtype)
        a @ b  # warm-up
        for _ in range(3):
            seconds, _ = timed(device, torch.matmul, a, b)
            best = max(best, 2 * n**3 / seconds)
    return best, f"measured {dtype} matmul peak {best / 1e9:,.0f} GFLOP/s"


def train_flops(model: VaswaniForConditionalGeneration, batch: int, src: int, tgt: int) -> float:
    """Training FLOPs of one step (:func:`hfattn.training.throughput.vaswani_training_flops`)."""
    return vaswani_training_flops(model, batch, src, tgt)


def engine_optimizer(model, device: str, engine: bool) -> torch.optim.Optimizer:
    """AdamW at lr 1e-4: as ``hfattn train`` builds it on ``device`` (fused on CUDA) with
    ``engine``, else with torch's defaults (as transformers' ``Trainer`` and Marian users get)."""
    kernel = adamw_kernel(device) if engine else {}
    return torch.optim.AdamW(model.parameters(), lr=1e-4, **kernel)


def measure_training(size: Size, args, autocast, peak_flops: float) -> dict:
    """Interleaved training steps of both models: median tokens/s, MFU against ``peak_flops``
    (FLOP/s, from :func:`matmul_peak`) and memory."""
    device = args.device
    ours, marian = make_models(size, args.vocab, args.max_positions, device)
    ids, mask, labels = make_batch(size.batch, args.src_len, args.tgt_len, args.vocab, device)
    logit_diff = check_same_function(
        ours, marian, ids, mask, labels, autocast, args.dtype == "bf16"
    )
    models = {"hfattn": ours, "marian": marian}
    optimizers = {
        "hfattn": engine_optimizer(ours, device, args.engine),
        "marian": engine_optimizer(marian, device, False),
    }
    for m in models.values():
        m.train()
    compiled = args.engine and resolve_compile("auto", ours.config.model_type, device)
    steppers = {"hfattn": compile_for_training(ours) if compiled else ours, "marian": marian}
    times = {k: [] for k in models}
    order = list(models)
    for step in range(args.warmup + args.steps):
        for k in order if step % 2 == 0 else order[::-1]:
            seconds, _ = timed(
                device, train_step, steppers[k], optimizers[k], ids, mask, labels, autocast
            )
            if step >= args.warmup:
                times[k].append(seconds)
    if args.profile and size.name == "paper-base":
        write_kernel_profile(
            args.profile,
            device,
            train_step,
            steppers["hfattn"],
            optimizers["hfattn"],
            ids,
            mask,
            labels,
            autocast,
        )
    # Memory last: the optimizer state exists by now, as in any later step.
    memory = {
        k: step_memory(m, optimizers[k], ids, mask, labels, autocast, device)
        for k, m in models.items()
    }
    tokens = labels.numel()
    flops = train_flops(ours, size.batch, args.src_len, args.tgt_len)
    result = {
        "size": size.__dict__,
        "src_len": args.src_len,
        "tgt_len": args.tgt_len,
        "target_tokens_per_step": tokens,
        "max_abs_logit_difference": logit_diff,
        "parameters": {k: sum(p.numel() for p in m.parameters()) for k, m in models.items()},
        "step_seconds": times,
        "flops_per_step": flops,
        "hfattn_compiled": compiled,
        "hfattn_adamw": "fused" if optimizers["hfattn"].defaults.get("fused") else "default",
    }
    for k in models:
        median = statistics.median(times[k])
        result[k] = {
            "median_step_s": median,
            "tokens_per_s": tokens / median,
            "best_step_s": min(times[k]),
            "mfu": flops / median / peak_flops,
            **memory[k],
        }
    result["tokens_per_s_ratio"] = (
        result["hfattn"]["tokens_per_s"] / result["marian"]["tokens_per_s"]
    )
    # The spread: Marian time / hfattn time of each pair of steps run back to back.
    result["paired_ratios"] = paired_ratios(times["hfattn"], times["marian"])
    result["memory_ratio"] = (
        memory["hfattn"]["saved_activation_bytes"] / memory["marian"]["saved_activation_bytes"]
    )
    if device == "cuda":
        result["cuda_peak_ratio"] = (
            memory["hfattn"]["cuda_peak_step_bytes"] / memory["marian"]["cuda_peak_step_bytes"]
        )
    return result


COMPILE_SETTINGS = ("regional", "true")
"""The ``training.compile`` settings ``--recipe`` measures, in this order: each layer stack
compiled once (``regional``), the whole model as one graph (``true``)."""


def measure_recipe(args, on_result=None) -> dict:
    """The training step of ``args.recipe`` (with ``args.set`` overrides) exactly as
    ``hfattn train`` runs it on ``args.device``: the recipe's own job (tokenizer, model, batches
    in its length buckets, on the device), optimizer (fused AdamW on CUDA), mixed precision
    (``auto`` resolved for the device) and gradient clipping; the step eager and compiled as
    each ``training.compile`` setting of ``args.compile`` compiles it (``true``: one graph,
    the buckets' dimensions marked dynamic; ``regional``: each layer stack once, symbolic
    sizes).

    First ``args.steps`` eager steps alone are timed (``eager_alone``, what ``training.compile:
    auto`` trains with) and, with ``args.profile``, their kernels written to the profile's
    ``_eager`` twin. Then, for each setting in turn, in an empty Inductor cache
    (``fresh_cache``: each compile is cold, as on a fresh machine): the compile, one compiled
    step on a batch of each bucket shape (``compile_s``: the steps that compiled a graph;
    ``compiles``: the graphs); then ``args.steps`` rounds of one eager and one compiled step
    on the same batch (the order flipping each round; both update the same weights), the
    batches taken in the recipe's training order, so every bucket's shape comes in. Figures:
    the target tokens/s and MFU of each (the sums over the rounds), and their ratio; with
    ``args.profile`` the kernels of the first setting's compiled step. ``on_result(result)``
    receives the result after the eager steps and after each setting, so that a run cut off
    by a time limit leaves what it measured."""
    recipe = load_recipe(args.recipe, args.set)
    cfg = recipe.training
    if cfg.token_budget is None:
        raise SystemExit("error: --recipe: the recipe has no training.token_budget")
    device = torch.device(args.device)
    job = build_job(recipe)
    model = job.model.to(device).train()
    batches = job.batches.to(device)
    precision = resolve_mixed_precision(cfg.mixed_precision, device)
    optimizer = training_optimizer(cfg, model, device=device, mixed_precision=precision)
    steppers = {"eager": model}
    count_flops = FlopCounter(model)
    peak_flops, peak_source = device_peak_flops(device, precision)

    def step(name: str, batch) -> None:
        if name != "eager":
            mark_dynamic_dims(batch)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = job.compute_loss(steppers[name], batch, None, False).loss
        loss.backward()
        if cfg.max_grad_norm:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def stream():
        epoch = 0
        while True:
            yield from batches.epoch(epoch)
            epoch += 1

    def speed(seconds: float, tokens: int, flops: float) -> dict:
        return {"seconds": seconds, "tokens_per_s": tokens / seconds,
                "mfu": flops / seconds / peak_flops if peak_flops else None}  # fmt: skip

    batch_stream = stream()
    timed(args.device, step, "eager", next(batch_stream))  # eager's first step: allocator
    alone, tokens, flops = 0.0, 0, 0
    for _ in range(args.steps):
        batch = next(batch_stream)
        tokens, flops = tokens + batch.num_tokens, flops + count_flops(batch)
        alone += timed(args.device, step, "eager", batch)[0]
    if args.profile:
        write_kernel_profile(eager_twin(args.profile), args.device, step, "eager", batch)
    result = {
        "recipe": recipe.name,
        "settings": args.set,
        "mixed_precision": precision,
        "optimizer": cfg.optimizer,
        "fused_adamw": bool(optimizer.defaults.get("fused")),
        "token_budget": cfg.token_budget,
        "bucket_shapes": [list(shape) for shape in batches.shapes],
        "on_device": batches.device.type == device.type,
        "peak_flops": peak_flops,
        "peak_source": peak_source,
        "eager_alone": {"rounds": args.steps, "target_tokens": tokens,
                        **speed(alone, tokens, flops)},
        "compiled": {},
    }  # fmt: skip
    if on_result is not None:
        on_result(result)
    for setting in args.compile:
        with fresh_cache():  # removed after the setting's last step
            torch._dynamo.reset()
            steppers[setting] = compile_for_training(
                model, regional=setting == "regional", dynamic_shapes=True
            )
            result["compiled"][setting] = compiled_rounds(
                args, step, setting, batch_stream, len(batches.shapes), count_flops, speed
            )
            if args.profile and setting == args.compile[0]:
                write_kernel_profile(args.profile, args.device, step, setting, next(batch_stream))
        if on_result is not None:
            on_result(result)
        del steppers[setting]  # the compiled copy and its graphs
    return result


def compiled_rounds(args, step, setting: str, batch_stream, num_shapes: int, count_flops, speed):
    """The compile of ``setting``'s stepper (one step on a batch of each of the ``num_shapes``
    bucket shapes) and ``args.steps`` rounds of it against eager: see :func:`measure_recipe`.

    Raises:
        RuntimeError: the compiled step compiled again after every shape had been seen."""
    graphs, compile_s, seen = compiled_graphs(), 0.0, set()
    while len(seen) < num_shapes:  # one compiled step a shape: the compile
        batch = next(batch_stream)
        shape = tuple(batch["labels"].shape)
        if shape not in seen:
            seen.add(shape)
            before = compiled_graphs()
            seconds, _ = timed(args.device, step, setting, batch)
            if compiled_graphs() > before:
                compile_s += seconds
    compiles = compiled_graphs() - graphs
    seconds = {"eager": 0.0, setting: 0.0}
    tokens = flops = 0
    for round_ in range(args.steps):
        batch = next(batch_stream)
        tokens += batch.num_tokens
        flops += count_flops(batch)
        for name in ("eager", setting) if round_ % 2 == 0 else (setting, "eager"):
            seconds[name] += timed(args.device, step, name, batch)[0]
    if compiled_graphs() - graphs != compiles:
        raise RuntimeError(f"compile {setting}: the step recompiled after every shape was seen")
    return {"compile_s": round(compile_s, 2), "compiles": compiles, "rounds": args.steps,
            "target_tokens": tokens, "flops": flops,
            "eager": speed(seconds["eager"], tokens, flops),
            "compiled": speed(seconds[setting], tokens, flops),
            "compiled_over_eager": seconds["eager"] / seconds[setting]}  # fmt: skip


def eager_twin(path: str) -> str:
    """``path`` with ``_eager`` before its suffix: the eager step's kernel profile."""
    path = Path(path)
    return str(path.with_name(f"{path.stem}_eager{path.suffix}"))


def recipe_report(result: dict, args) -> BenchReport:
    """The ``--recipe`` figures for ``run_all.py`` (``--json``)."""
    report = BenchReport("vaswani_recipe", device=args.device)
    target = RECIPE_MFU_TARGET if args.device == "cuda" else None
    for setting, measured in result["compiled"].items():
        for name in ("eager", "compiled"):
            label = f"{result['recipe']} step, {name} (compile {setting} rounds)"
            report.add(f"{label}: target tokens/s", measured[name]["tokens_per_s"], "tokens/s")
            if measured[name]["mfu"] is not None:
                report.add(f"{label}: MFU", measured[name]["mfu"], "", target)
        report.add(f"compile {setting}: compiled / eager tokens/s",
                   measured["compiled_over_eager"], "x")  # fmt: skip
        report.add(f"compile {setting}: cold compile seconds", measured["compile_s"], "s")
    return report


def generation_config(beams: int, new_tokens: int, use_cache: bool) -> GenerationConfig:
    return GenerationConfig(
        do_sample=False,
        num_beams=beams,
        min_new_tokens=new_tokens,
        max_new_tokens=new_tokens,
        use_cache=use_cache,
        pad_token_id=PAD,
        eos_token_id=EOS,
        bos_token_id=BOS,
        decoder_start_token_id=BOS,
        forced_eos_token_id=None,
        length_penalty=1.0,
        early_stopping=False,
    )


def measure_generation(size: Size, args, autocast) -> dict:
    """Cached vs uncached (hfattn) and hfattn vs Marian (cached), greedy and beam."""
    device = args.device
    ours, marian = make_models(size, args.vocab, args.max_positions, device)
    ids, mask, _ = make_batch(args.gen_batch, args.src_len, args.tgt_len, args.vocab, device, 1)
    ours.eval()
    marian.eval()
    tokens = args.gen_batch * args.new_tokens
    result = {"size": size.__dict__, "batch": args.gen_batch, "new_tokens": args.new_tokens}

    def generate(model, beams, use_cache, new_tokens=args.new_tokens):
        config = generation_config(beams, new_tokens, use_cache)
        with torch.no_grad(), autocast():
            return model.generate(input_ids=ids, attention_mask=mask, generation_config=config)

    for label, beams in (("greedy", 1), (f"beam{args.beams}", args.beams)):
        # Warm-up at the full length: a GPU pays once for each new shape (cuDNN builds an
        # attention plan per key length), and a first timed call must not pay it for both.
        for model in (ours, marian):
            generate(model, beams, True)
        uncached = label == "greedy" or not args.skip_uncached_beam
        if device == "cuda" and args.uncached_repeats and uncached:
            generate(ours, beams, False)
        times = {"hfattn": [], "marian": [], "hfattn_no_cache": []}
        outputs = {}
        runs = [("hfattn", ours, True), ("marian", marian, True)]
        for rep in range(args.gen_repeats):
            for key, model, use_cache in runs if rep % 2 == 0 else runs[::-1]:
                seconds, outputs[key] = timed(device, generate, model, beams, use_cache)
                times[key].append(seconds)
            # The uncached runs sit between cached ones, so the two see the same load.
            if rep < args.uncached_repeats and uncached:
                seconds, outputs["hfattn_no_cache"] = timed(device, generate, ours, beams, False)
                times["hfattn_no_cache"].append(seconds)
        entry = {"seconds": times}
        for key, values in times.items():
            if values:
                entry[key] = {"median_s": statistics.median(values), "best_s": min(values)}
                entry[key]["tokens_per_s"] = tokens / entry[key]["median_s"]
        entry["same_output_hfattn_marian"] = same_rows(outputs["hfattn"], outputs["marian"])
        entry["ratio_hfattn_marian"] = (
            entry["hfattn"]["tokens_per_s"] / entry["marian"]["tokens_per_s"]
        )
        entry["paired_ratios_hfattn_marian"] = paired_ratios(times["hfattn"], times["marian"])
        if times["hfattn_no_cache"]:
            entry["same_output_cache_no_cache"] = same_rows(
                outputs["hfattn"], outputs["hfattn_no_cache"]
            )
            entry["ratio_cache_no_cache"] = (
                entry["hfattn"]["tokens_per_s"] / entry["hfattn_no_cache"]["tokens_per_s"]
            )
        assert outputs["hfattn"].shape[1] == args.new_tokens + 1  # start token + new ones
        result[label] = entry
    return result


def compile_config(device: str) -> CompileConfig:
    """How ``generate`` compiles the static-cache step: transformers' own default on a GPU
    (``mode="reduce-overhead"``, CUDA graphs), ``mode="default"`` elsewhere, where
    ``generate`` compiles only when asked to (``_compile_all_devices``)."""
    if device == "cuda":
        return CompileConfig(fullgraph=True)
    config = CompileConfig(fullgraph=True, mode="default")
    config._compile_all_devices = True
    return config


def measure_static_cache(size: Size, args, autocast) -> dict:
    """Greedy generation of one source (batch 1, ``args.new_tokens`` tokens): the static
    cache with the decoding step compiled (``cache_implementation="static"`` and
    :func:`compile_config`, one graph, no break) against the default dynamic cache."""
    device = args.device
    model = make_models(size, args.vocab, args.max_positions, device)[0].eval()
    ids, mask, _ = make_batch(1, args.src_len, args.tgt_len, args.vocab, device, 2)
    config = generation_config(1, args.new_tokens, True)

    def generate(**extra):
        with torch.no_grad(), autocast():
            return model.generate(
                input_ids=ids, attention_mask=mask, generation_config=config, **extra
            )

    static = {"cache_implementation": "static", "compile_config": compile_config(device)}
    generate()  # warm-up
    compile_s, first = timed(device, lambda: generate(**static))
    times, outputs = {"dynamic": [], "static_compiled": []}, {}
    runs = [("dynamic", {}), ("static_compiled", static)]
    for rep in range(max(3, args.gen_repeats)):
        for key, extra in runs if rep % 2 == 0 else runs[::-1]:
            seconds, outputs[key] = timed(device, lambda e=extra: generate(**e))
            times[key].append(seconds)
    medians = {key: statistics.median(values) for key, values in times.items()}
    return {
        "new_tokens": args.new_tokens,
        "first_static_call_s": compile_s,
        "seconds": times,
        "tokens_per_s": {key: args.new_tokens / median for key, median in medians.items()},
        "ratio": medians["dynamic"] / medians["static_compiled"],
        "paired_ratios": paired_ratios(times["static_compiled"], times["dynamic"]),
        "same_output": bool(torch.equal(outputs["dynamic"], outputs["static_compiled"]))
        and bool(torch.equal(first, outputs["dynamic"])),
    }


def paired_ratios(ours: list[float], reference: list[float]) -> dict:
    """``reference / ours`` time of each pair of runs made back to back: median and range."""
    ratios = sorted(r / o for o, r in zip(ours, reference, strict=True))
    return {"median": statistics.median(ratios), "min": ratios[0], "max": ratios[-1]}


def same_rows(a: torch.Tensor, b: torch.Tensor) -> float:
    """Fraction of generated sequences that are identical."""
    if a.shape != b.shape:
        return 0.0
    return (a == b).all(dim=1).float().mean().item()


# --------------------------------------------------------------------------- report


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def machine(device: str) -> str:
    if device == "cuda":
        return torch.cuda.get_device_name()
    return (
        f"{platform.machine()} CPU, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads"
    )


def spread(paired: dict) -> str:
    """The range of the back-to-back ratios, e.g. ``(pairs 0.93–1.05)``."""
    return f"(pairs {paired['min']:.2f}–{paired['max']:.2f})"


@dataclass(frozen=True)
class Row:
    """One line of the table: a ratio of hfattn's figure to the reference's, and its target."""

    measure: str
    ours: str
    reference: str
    ratio: float
    spread: str = ""
    target: float | None = None


def rows(results: dict, args) -> list[Row]:
    """The table's rows, in order (the hfattn/Marian training target applies to CPU fp32)."""
    out = []
    for train in results["training"]:
        s = train["size"]
        name = f"{s['name']} ({s['layers']}+{s['layers']}, d {s['d_model']}, batch {s['batch']})"
        h, m = train["hfattn"], train["marian"]
        target = PARITY_TARGET if args.device == "cpu" and args.dtype == "fp32" else None
        out.append(
            Row(
                f"training target tokens/s, {name}",
                f"{h['tokens_per_s']:,.0f}",
                f"{m['tokens_per_s']:,.0f}",
                train["tokens_per_s_ratio"],
                spread(train["paired_ratios"]),
                target,
            )
        )
        out.append(
            Row(
                f"saved activations per step (MiB), {name}",
                f"{h['saved_activation_bytes'] / 2**20:,.1f}",
                f"{m['saved_activation_bytes'] / 2**20:,.1f}",
                train["memory_ratio"],
            )
        )
        if "cuda_peak_ratio" in train:
            out.append(
                Row(
                    f"CUDA peak memory of a step (MiB), {name}",
                    f"{h['cuda_peak_step_bytes'] / 2**20:,.1f}",
                    f"{m['cuda_peak_step_bytes'] / 2**20:,.1f}",
                    train["cuda_peak_ratio"],
                )
            )
        out.append(
            Row(
                f"MFU (of the {results['peak']}), {name}",
                f"{h['mfu']:.1%}",
                f"{m['mfu']:.1%}",
                h["mfu"] / m["mfu"],
            )
        )
    gen = results["generation"] or {}
    for label in [k for k in gen if k.startswith(("greedy", "beam"))]:
        entry = gen[label]
        what = f"{label}, batch {gen['batch']} × {gen['new_tokens']} new tokens, tokens/s"
        if "ratio_cache_no_cache" in entry:
            out.append(
                Row(
                    f"{what}: KV cache vs use_cache=False",
                    f"{entry['hfattn']['tokens_per_s']:,.0f}",
                    f"{entry['hfattn_no_cache']['tokens_per_s']:,.0f} (hfattn, no cache)",
                    entry["ratio_cache_no_cache"],
                    target=CACHE_TARGET,
                )
            )
        out.append(
            Row(
                f"{what}: hfattn vs Marian, both cached",
                f"{entry['hfattn']['tokens_per_s']:,.0f}",
                f"{entry['marian']['tokens_per_s']:,.0f}",
                entry["ratio_hfattn_marian"],
                spread(entry["paired_ratios_hfattn_marian"]),
                PARITY_TARGET,
            )
        )
    static = results.get("static_cache")
    if static:
        out.append(
            Row(
                f"greedy, batch 1 × {static['new_tokens']} new tokens, tokens/s: static cache + "
                "torch.compile vs dynamic cache",
                f"{static['tokens_per_s']['static_compiled']:,.0f}",
                f"{static['tokens_per_s']['dynamic']:,.0f} (dynamic cache)",
                static["ratio"],
                spread(static["paired_ratios"]),
                STATIC_CACHE_TARGET if args.device == "cuda" else None,
            )
        )
    return out


def table(results: dict, args) -> str:
    lines = [
        "| measure | hfattn | Marian / reference | ratio | target | met |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for row in rows(results, args):
        digits = 2 if row.ratio >= 10 else 3
        ratio = f"{row.ratio:.{digits}f} {row.spread}".strip()
        target = f"≥ {row.target:g}" if row.target is not None else ""
        met = "" if row.target is None else "met" if row.ratio >= row.target else "not met"
        lines.append(
            f"| {row.measure} | {row.ours} | {row.reference} | {ratio} | {target} | {met} |"
        )
    return "\n".join(lines)


def to_report(results: dict, args) -> BenchReport:
    """The table's ratios as records for ``run_all.py``."""
    report = BenchReport("vaswani", args.device)
    for row in rows(results, args):
        detail = f"{row.ours} vs {row.reference} {row.spread}".strip()
        report.add(f"{row.measure} ({args.dtype})", row.ratio, "x", row.target, detail=detail)
    return report


def notes(results: dict) -> str:
    """The checks behind the table, one line each."""
    lines = []
    for train in results["training"]:
        lines.append(
            f"- {train['size']['name']}: max |logit difference| hfattn vs Marian (same weights, "
            f"eval) {train['max_abs_logit_difference']:.2e}; parameters {train['parameters']} "
            "(Marian counts its two frozen sinusoidal tables, hfattn its output bias); "
            f"{train['flops_per_step'] / 1e9:,.1f} GFLOP per training step"
        )
    gen = results["generation"] or {}
    for label in [k for k in gen if k.startswith(("greedy", "beam"))]:
        entry = gen[label]
        line = f"- {label}: identical sequences hfattn vs Marian {entry['same_output_hfattn_marian']:.0%}"
        if "same_output_cache_no_cache" in entry:
            line += f", cache vs no cache {entry['same_output_cache_no_cache']:.0%}"
        lines.append(line)
    static = results.get("static_cache")
    if static:
        lines.append(
            f"- static cache + compile: first call (compiling) {static['first_static_call_s']:.1f} s; "
            f"identical sequences to the dynamic cache: {static['same_output']}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_device_argument(parser)
    parser.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--threads", type=int, default=1, help="torch threads on CPU")
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--layers", type=int, default=3, help="encoder = decoder layers")
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--ffn", type=int, default=1024)
    parser.add_argument(
        "--batch", type=int, default=64, help="training batch, small size (0: skip)"
    )
    parser.add_argument(
        "--base-batch",
        type=int,
        default=None,
        help="training batch at the paper-base size (0: skip; default 8 on a CPU, 256 on CUDA)",
    )
    parser.add_argument("--src-len", type=int, default=32)
    parser.add_argument("--tgt-len", type=int, default=32)
    parser.add_argument("--max-positions", type=int, default=512)
    parser.add_argument("--steps", type=int, default=7, help="timed training steps per model")
    parser.add_argument("--warmup", type=int, default=1, help="discarded steps per model")
    parser.add_argument("--gen-batch", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--beams", type=int, default=4)
    parser.add_argument("--gen-repeats", type=int, default=3, help="cached runs per model")
    parser.add_argument("--uncached-repeats", type=int, default=1, help="use_cache=False runs")
    parser.add_argument(
        "--skip-uncached-beam", action="store_true", help="no use_cache=False beam search run"
    )
    parser.add_argument(
        "--skip-static-cache",
        action="store_true",
        help="no static cache + torch.compile run (batch 1; compiling takes seconds to minutes)",
    )
    parser.add_argument(
        "--engine",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="train hfattn as hfattn train does on the device (compiled and fused AdamW on "
        "CUDA); --no-engine: eager with AdamW's defaults, as Marian",
    )
    parser.add_argument("--out", help="write every number to this JSON file")
    parser.add_argument(
        "--skip-generation", action="store_true", help="training only: no generation runs"
    )
    parser.add_argument(
        "--profile",
        help="write the kernels of 3 paper-base hfattn training steps (torch.profiler) here "
        "(with --recipe: 3 compiled steps of the recipe)",
    )
    parser.add_argument(
        "--recipe",
        help="measure this recipe's own training step instead (its batches, optimizer, "
        "precision), eager and compiled: measure_recipe",
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="--recipe override"
    )
    parser.add_argument(
        "--compile",
        nargs="+",
        choices=COMPILE_SETTINGS,
        default=list(COMPILE_SETTINGS),
        help="--recipe: the training.compile settings measured against eager, in this order, "
        "each from a cold Inductor cache (default: %(default)s)",
    )
    add_json_argument(parser)
    parser.add_argument("--quick", action="store_true", help="a smoke run: tiny counts")
    args = parser.parse_args()
    if args.recipe:
        main_recipe(args)
        return
    if args.base_batch is None:
        args.base_batch = 256 if args.device == "cuda" else 8
    if args.quick:
        args.steps, args.warmup, args.gen_repeats, args.new_tokens = 2, 1, 1, 8
        args.base_batch = 0
    if args.device == "cpu":
        torch.set_num_threads(args.threads)

    def autocast():
        return torch.autocast(args.device, dtype=torch.bfloat16, enabled=args.dtype == "bf16")

    small = Size("small", args.layers, args.d_model, args.heads, args.ffn, args.batch)
    sizes = [small] if args.batch else []
    if args.base_batch:
        sizes.append(Size("paper-base", 6, 512, 8, 2048, args.base_batch))
    load_before = load_average()
    started = time.perf_counter()
    peak_flops, peak = matmul_peak(args.device, args.dtype)  # once: one yardstick for all sizes
    results = {
        "provenance": provenance(gpu_name(args.device)),
        "date": datetime.date.today().isoformat(),
        "machine": machine(args.device),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "args": {k: v for k, v in vars(args).items() if k != "json"},
        "load_average_before": load_before,
        "peak_flops": peak_flops,
        "peak": peak,
        "training": [measure_training(size, args, autocast, peak_flops) for size in sizes],
        "generation": None if args.skip_generation else measure_generation(small, args, autocast),
        "static_cache": None
        if args.skip_static_cache
        else measure_static_cache(small, args, autocast),
    }
    results["load_average_after"] = load_average()
    results["wall_seconds"] = time.perf_counter() - started
    report = table(results, args)
    print(
        f"{results['machine']}, {args.dtype}, torch {results['torch']}, transformers "
        f"{results['transformers']}, {results['date']}; load average before/after "
        f"{load_before} / {results['load_average_after']}; {results['wall_seconds']:.0f} s\n"
    )
    print(report)
    print()
    print(notes(results))
    if args.out:
        write_atomically(args.out, json.dumps(results, indent=2))
    to_report(results, args).write(args.json)


def main_recipe(args) -> None:
    """``--recipe``: :func:`measure_recipe`, printed, and written to ``--out`` / ``--json``."""
    if args.device == "cpu":
        torch.set_num_threads(args.threads)
    load_before = load_average()
    results = {"provenance": provenance(gpu_name(args.device)), "torch": torch.__version__,
               "load_average_before": load_before}  # fmt: skip

    def on_result(partial: dict) -> None:  # after the eager steps, then after each setting
        if not partial["compiled"]:
            alone = partial["eager_alone"]
            print(f"{partial['recipe']} eager alone: {alone['tokens_per_s']:,.0f} target "
                  "tokens/s" + (f", MFU {alone['mfu']:.1%}" if alone["mfu"] is not None else ""),
                  flush=True)  # fmt: skip
        else:
            setting, measured = list(partial["compiled"].items())[-1]
            compiled = measured["compiled"]
            print(f"compile {setting}: {compiled['tokens_per_s']:,.0f} target tokens/s"
                  + (f", MFU {compiled['mfu']:.1%}" if compiled["mfu"] is not None else "")
                  + f", {measured['compiled_over_eager']:.2f}x eager; cold compile "
                  f"{measured['compile_s']} s, {measured['compiles']} graph(s) for "
                  f"{len(partial['bucket_shapes'])} shapes", flush=True)  # fmt: skip
        if args.out:
            write_atomically(
                args.out, json.dumps({**results, "recipe_training": partial}, indent=2)
            )

    result = measure_recipe(args, on_result)
    results.update(load_average_after=load_average(), recipe_training=result)
    if args.out:
        write_atomically(args.out, json.dumps(results, indent=2))
    recipe_report(result, args).write(args.json)


if __name__ == "__main__":
    main()
