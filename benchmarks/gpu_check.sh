#!/usr/bin/env bash
# The GPU measurements of hfattn, in sets that each fit one device call of under 9 minutes on
# one H100 / H200:
#   speedrun (the default)
#     1. benchmarks/speedrun.py recipes/vaswani_bible_en_es_base.yaml: the recipe as shipped,
#        timed from the command to the saved model, its validation BLEU at each periodic
#        evaluation against the wall seconds, the test BLEU / chrF of the saved model (beam 4,
#        every test verse), compile seconds, steady tokens/s and MFU
#        (speedrun_vaswani_bible_en_es_base_<gpu>.json / .png);
#     2. bench_vaswani.py --recipe recipes/vaswani_bible_en_es_base.yaml: the recipe's own
#        step at its 25k-token batches, eager (alone, written before anything compiles), then
#        compiled as training.compile: regional (each layer stack once) and true (one graph
#        for the 8 buckets), each from a cold Inductor cache and written as it ends: tokens/s,
#        MFU, cold compile seconds, and the kernels of the eager and the regional step
#        (vaswani_recipe_<gpu>.json, vaswani_recipe_<gpu>_kernels[_eager].txt);
#   rnn (luong, then rnnsearch, each a set of its own too)
#     3. the speedruns of recipes/bahdanau_bible_en_es_luong_base.yaml and
#        recipes/bahdanau_bible_en_es_rnnsearch.yaml;
#   candidates
#     3b. the Transformer recipe's small-corpus candidate: fairseq's transformer_iwslt_de_en
#        sizes (FFN 1024, 4 heads, attention and activation dropout 0.1) over the recipe's
#        batches and schedule, scored on the validation books only (the test books stay
#        unread until a candidate ships): candidate_vaswani_bible_en_es_base_iwslt_<gpu>.json;
#        then the Luong recipe with residual connections between its 4 stacked layers
#        (candidate_bahdanau_bible_en_es_luong_base_residual_<gpu>.json);
#   compile
#     4. benchmarks/speedrun.py of the Transformer base recipe with training.compile=regional
#        (time to quality with the compile paid inside the run; compile_s, compiles and the
#        eager twin's tokens/s in the file), written to $RESULTS/compile_regional/ so that the
#        shipped recipe's speedrun file is not replaced (up to 8 minutes: a call of its own);
#   step
#     5. bench_vaswani.py: hfattn against MarianMTModel as transformers ships it (eager, AdamW
#        defaults), paper-base 6+6 at 256 x 64 -> 64; bench_bahdanau.py: teacher-forced
#        attention against the per-step loop.
# Each writes its results into $RESULTS (default benchmarks/results), the device's name in
# the file names. A step that fails or runs past its time limit is reported and the next
# one runs; the exit status is the number of failed steps.
#
#   bash benchmarks/gpu_check.sh [speedrun|rnn|luong|rnnsearch|candidates|compile|step ...]   # from the repository root
#   PYTHON=/path/to/python RESULTS=/tmp/gpu bash benchmarks/gpu_check.sh
#
# The recipes read the Bible corpus from the SWORD modules or the local data cache: a
# machine without network access needs them there (the run fails with the data source's
# message otherwise). For such a machine, `bash benchmarks/gpu_bundle.sh` packs the missing
# wheels and the data beside the checkout, and `bash benchmarks/gpu_on_device.sh OUT_DIR
# [SET ...]` run there installs them, runs this script and packs its results into
# OUT_DIR/gpu.tgz.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
RESULTS=${RESULTS:-benchmarks/results}
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

speedrun() {  # speedrun NAME [OUT [KEY=VALUE ...] [--name FILE_NAME]]: command to saved model
  local name=$1 out=${2:-$RESULTS} settings=()
  for setting in "${@:3}"; do
    if [[ $setting == --name=* ]]; then settings+=("$setting"); else settings+=(--set "$setting"); fi
  done
  mkdir -p "$out"
  "$PYTHON" benchmarks/speedrun.py "recipes/$name.yaml" --out "$out" "${settings[@]}"
}

recipe_step() {  # the Transformer recipe's own step, eager and compiled both ways
  "$PYTHON" benchmarks/bench_vaswani.py --device cuda --recipe recipes/vaswani_bible_en_es_base.yaml \
    --steps 20 --profile "$RESULTS/vaswani_recipe_${tag}_kernels.txt" \
    --out "$RESULTS/vaswani_recipe_$tag.json"
}

bench_vaswani() {
  "$PYTHON" benchmarks/bench_vaswani.py --device cuda --dtype bf16 \
    --batch 0 --src-len 64 --tgt-len 64 --base-batch 256 --steps 10 --warmup 3 \
    --skip-static-cache --skip-uncached-beam \
    --profile "$RESULTS/vaswani_cuda_bf16_${tag}_kernels.txt" \
    --out "$RESULTS/vaswani_cuda_bf16_$tag.json" | tee "$RESULTS/vaswani_cuda_bf16_$tag.md"
}

bench_bahdanau() {
  "$PYTHON" benchmarks/bench_bahdanau.py --device cuda \
    --json "$RESULTS/bahdanau_cuda_$tag.json" | tee "$RESULTS/bahdanau_cuda_$tag.md"
}

export PYTHON RESULTS tag
export -f speedrun recipe_step bench_vaswani bench_bahdanau
for set in "${@:-speedrun}"; do
  case $set in
    speedrun)
      step vaswani_bible_en_es_base 400 speedrun vaswani_bible_en_es_base
      step recipe_step 200 recipe_step ;;
    rnn)
      step bahdanau_bible_en_es_luong_base 250 speedrun bahdanau_bible_en_es_luong_base
      step bahdanau_bible_en_es_rnnsearch 250 speedrun bahdanau_bible_en_es_rnnsearch ;;
    luong) step bahdanau_bible_en_es_luong_base 250 speedrun bahdanau_bible_en_es_luong_base ;;
    rnnsearch) step bahdanau_bible_en_es_rnnsearch 250 speedrun bahdanau_bible_en_es_rnnsearch ;;
    candidates)
      step vaswani_iwslt_sized 330 speedrun vaswani_bible_en_es_base "$RESULTS" \
        --name=candidate_vaswani_bible_en_es_base_iwslt \
        model.ffn_dim=1024 model.num_heads=4 model.attention_dropout=0.1 \
        model.activation_dropout=0.1 'evaluation.splits=[validation]'
      step luong_residual 250 speedrun bahdanau_bible_en_es_luong_base "$RESULTS" \
        --name=candidate_bahdanau_bible_en_es_luong_base_residual \
        model.residual_connections=true 'evaluation.splits=[validation]' ;;
    compile)
      step vaswani_bible_en_es_base_regional 480 speedrun vaswani_bible_en_es_base \
        "$RESULTS/compile_regional" training.compile=regional ;;
    step)
      step bench_vaswani 150 bench_vaswani
      step bench_bahdanau 45 bench_bahdanau ;;
    *) echo "gpu_check.sh: unknown set $set (speedrun, rnn, luong, rnnsearch, candidates, compile or step)" >&2; exit 2 ;;
  esac
done
echo "gpu_check.sh: $failed step(s) failed"
exit "$failed"
