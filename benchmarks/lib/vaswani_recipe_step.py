"""A recipe's own training step, eager and compiled as each ``training.compile`` setting
compiles it, exactly as ``hfattn train`` runs it (``benchmarks/bench_vaswani.py --recipe``)."""

from __future__ import annotations

from pathlib import Path

import torch
from torch._inductor.utils import fresh_cache

from benchmarks.lib.benchlib import BenchReport
from benchmarks.lib.step_timing import timed, write_kernel_profile
from hfattn.orchestration.run import build_job
from hfattn.recipes import load_recipe
from hfattn.training.compiling import compile_for_training, compiled_graphs, mark_dynamic_dims
from hfattn.training.optim import training_optimizer
from hfattn.training.precision import resolve_mixed_precision
from hfattn.training.throughput import FlopCounter, device_peak_flops

RECIPE_MFU_TARGET = 0.35
"""The MFU the recipe's step should reach on an H100 / H200 in bf16 (``--recipe``)."""

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
