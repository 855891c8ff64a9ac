#!/usr/bin/env bash
# The GPU measurements of hfattn in one call (about 8 minutes on one H100 / H200):
#   1. bench_vaswani.py: hfattn (compiled, fused AdamW, bf16 autocast) against MarianMTModel
#      as transformers ships it (eager, AdamW defaults), paper-base 6+6 at 256 x 64 -> 64
#      (16k target tokens a step): tokens/s, their ratio and the MFU;
#   2. bench_bahdanau.py: teacher-forced attention against the per-step loop;
#   3. `hfattn train recipes/vaswani_bible_en_es_base.yaml` with a 2-minute clock: the
#      run's tokens/s and MFU (metrics.jsonl, eval_results.json).
# Each writes its results into benchmarks/results/, the device's name in the file name.
#
#   bash benchmarks/gpu_check.sh            # from the repository root
#   PYTHON=/path/to/python bash benchmarks/gpu_check.sh
#
# The recipe reads the Bible corpus from the local data cache: a machine without network
# access needs it there (the run fails with the data source's message otherwise).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

device=$("$PYTHON" -c 'import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")')
if [[ -z "$device" ]]; then
  echo "gpu_check.sh: no CUDA device (torch.cuda.is_available() is False); nothing measured" >&2
  exit 1
fi
tag=$(echo "$device" | tr -c 'A-Za-z0-9\n' '_' | sed 's/__*/_/g; s/_$//')
results=benchmarks/results
mkdir -p "$results"
echo "gpu_check.sh on $device (results: $results/*_$tag.*)"

timeout 240 "$PYTHON" benchmarks/bench_vaswani.py --device cuda --dtype bf16 \
  --src-len 64 --tgt-len 64 --base-batch 256 --steps 10 --warmup 3 \
  --out "$results/vaswani_cuda_bf16_$tag.json" | tee "$results/vaswani_cuda_bf16_$tag.md"

timeout 90 "$PYTHON" benchmarks/bench_bahdanau.py --device cuda \
  --json "$results/bahdanau_cuda_$tag.json" | tee "$results/bahdanau_cuda_$tag.md"

run=$(mktemp -d)/vaswani_bible_en_es_base
timeout 300 "$PYTHON" -m hfattn train recipes/vaswani_bible_en_es_base.yaml \
  --set "output_dir=$run" --set training.max_minutes=2 \
  --set training.eval_every=null --set training.save_every=null
cp "$run/metrics.jsonl" "$results/vaswani_bible_en_es_base_2min_${tag}_metrics.jsonl"
cp "$run/eval_results.json" "$results/vaswani_bible_en_es_base_2min_${tag}_eval_results.json"
"$PYTHON" - "$run/eval_results.json" <<'PY'
import json, sys
training = json.load(open(sys.argv[1]))["training"]
print({key: training.get(key) for key in
       ("hardware", "global_step", "train_tokens_per_s", "mfu", "peak_flops_source")})
PY
