#!/usr/bin/env bash
# The GPU measurements of hfattn in one call (about 9 minutes on one H100 / H200):
#   1. bench_vaswani.py: training hfattn (compiled, fused AdamW, bf16 autocast) against
#      MarianMTModel as transformers ships it (eager, AdamW defaults), paper-base 6+6 at
#      256 x 64 -> 64 (16k target tokens a step): tokens/s, their ratio and the MFU, and the
#      kernels of three hfattn steps (torch.profiler); generation of the small size;
#   2. bench_bahdanau.py: teacher-forced attention against the per-step loop; then
#      bench_vaswani.py's training at 1,024 rows (65k target tokens a step);
#   3. `hfattn train recipes/vaswani_bible_en_es_base.yaml` and
#      `hfattn train recipes/bahdanau_bible_en_es_rnnsearch.yaml`, each alone with a short
#      clock and the final evaluation on 256 validation verses: the runs' tokens/s and MFU
#      (metrics.jsonl, eval_results.json).
# Each writes its results into $RESULTS (default benchmarks/results), the device's name in
# the file names. A step that fails or runs past its time limit is reported and the next
# one runs; the exit status is the number of failed steps.
#
#   bash benchmarks/gpu_check.sh            # from the repository root
#   PYTHON=/path/to/python RESULTS=/tmp/gpu bash benchmarks/gpu_check.sh
#
# The recipes read the Bible corpus from the SWORD modules or the local data cache: a
# machine without network access needs them there (the run fails with the data source's
# message otherwise). For such a machine, `bash benchmarks/gpu_bundle.sh` packs the missing
# wheels and the data beside the checkout, and `bash benchmarks/gpu_on_device.sh OUT_DIR` run
# there installs them, runs this script and packs its results into OUT_DIR/gpu.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
RESULTS=${RESULTS:-benchmarks/results}
VASWANI_MINUTES=${VASWANI_MINUTES:-2}
RNNSEARCH_MINUTES=${RNNSEARCH_MINUTES:-1}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

device=$("$PYTHON" -c 'import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")')
if [[ -z "$device" ]]; then
  echo "gpu_check.sh: no CUDA device (torch.cuda.is_available() is False); nothing measured" >&2
  exit 1
fi
tag=$(echo "$device" | tr -c 'A-Za-z0-9\n' '_' | sed 's/__*/_/g; s/_$//')
mkdir -p "$RESULTS"
echo "gpu_check.sh on $device (results: $RESULTS/*_$tag.*)"
failed=0

step() {  # step NAME SECONDS COMMAND...: run COMMAND under a time limit, report its status
  local name=$1 limit=$2 start=$SECONDS status
  shift 2
  echo "== $name (limit ${limit} s)"
  timeout "$limit" bash -o pipefail -c '"$@"' "$name" "$@"  # the steps are functions: a child bash runs them
  status=$?
  echo "== $name: exit $status after $((SECONDS - start)) s"
  if ((status != 0)); then failed=$((failed + 1)); fi
  return "$status"
}

bench_vaswani() {
  "$PYTHON" benchmarks/bench_vaswani.py --device cuda --dtype bf16 \
    --batch 0 --src-len 64 --tgt-len 64 --base-batch 256 --steps 10 --warmup 3 \
    --skip-static-cache --skip-uncached-beam \
    --profile "$RESULTS/vaswani_cuda_bf16_${tag}_kernels.txt" \
    --out "$RESULTS/vaswani_cuda_bf16_$tag.json" | tee "$RESULTS/vaswani_cuda_bf16_$tag.md"
}

bench_vaswani_large() {  # 1,024 rows (65k target tokens a step): the MFU of a bigger batch
  "$PYTHON" benchmarks/bench_vaswani.py --device cuda --dtype bf16 \
    --batch 0 --src-len 64 --tgt-len 64 --base-batch 1024 --steps 6 --warmup 2 \
    --skip-static-cache --skip-generation \
    --out "$RESULTS/vaswani_cuda_bf16_1024rows_$tag.json" | tee "$RESULTS/vaswani_cuda_bf16_1024rows_$tag.md"
}

bench_bahdanau() {
  "$PYTHON" benchmarks/bench_bahdanau.py --device cuda \
    --json "$RESULTS/bahdanau_cuda_$tag.json" | tee "$RESULTS/bahdanau_cuda_$tag.md"
}

train_recipe() {  # train_recipe NAME MINUTES: a short run of recipes/NAME.yaml
  local name=$1 minutes=$2 run
  run=$(mktemp -d)/$name
  "$PYTHON" -m hfattn train "recipes/$name.yaml" \
    --set "output_dir=$run" --set "training.max_minutes=$minutes" \
    --set training.eval_every=null --set training.save_every=null \
    --set "evaluation.splits=[validation]" --set evaluation.max_examples=256 || return
  local prefix="$RESULTS/${name}_${minutes}min_${tag}"
  cp "$run/metrics.jsonl" "${prefix}_metrics.jsonl"
  cp "$run/eval_results.json" "${prefix}_eval_results.json"
  "$PYTHON" - "$run/eval_results.json" <<'PY'
import json, sys
training = json.load(open(sys.argv[1]))["training"]
print({key: training.get(key) for key in
       ("hardware", "global_step", "train_tokens_per_s", "mfu", "peak_flops_source")})
PY
}

export PYTHON RESULTS tag
export -f bench_vaswani bench_vaswani_large bench_bahdanau train_recipe
step bench_vaswani 150 bench_vaswani
step bench_bahdanau 45 bench_bahdanau
step bench_vaswani_large 120 bench_vaswani_large
step vaswani_bible_en_es_base 170 train_recipe vaswani_bible_en_es_base "$VASWANI_MINUTES"
step bahdanau_bible_en_es_rnnsearch 100 train_recipe bahdanau_bible_en_es_rnnsearch "$RNNSEARCH_MINUTES"
echo "gpu_check.sh: $failed step(s) failed"
exit "$failed"
