"""Training steps of the Vaswani model and of ``MarianMTModel`` of the same size, interleaved:
median tokens/s, MFU against a measured or datasheet peak, and the memory of a step
(``benchmarks/bench_vaswani.py``, its part 1)."""

from __future__ import annotations

import statistics

import torch

from benchmarks.lib.benchlib import synchronize
from benchmarks.lib.step_timing import paired_ratios, timed, write_kernel_profile
from benchmarks.lib.vaswani_marian import Size, check_same_function, make_batch, make_models
from hfattn import VaswaniForConditionalGeneration
from hfattn.training.compiling import compile_for_training, resolve_compile
from hfattn.training.optim import adamw_kernel
from hfattn.training.throughput import device_peak_flops, vaswani_training_flops


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
        """The context in which autograd's saved tensors are counted."""
        return torch.autograd.graph.saved_tensors_hooks(self._pack, lambda tensor: tensor)

    @property
    def total(self) -> int:
        """The bytes counted so far."""
        return sum(self.storages.values())


def train_step(model, optimizer, ids, mask, labels, autocast) -> None:
    """One training step: forward under ``autocast``, backward, optimizer step."""
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
