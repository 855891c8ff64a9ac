#!/usr/bin/env bash
# Run benchmarks/gpu_check.sh on a GPU machine with no network, from what
# benchmarks/gpu_bundle.sh packed (.whl/, .gpu/), and pack its results into
# OUT_DIR/gpu.tgz (rewritten every 15 s while it runs, so a run cut short still leaves what it
# measured) with its log in OUT_DIR/log.txt.
#
#   bash benchmarks/gpu_on_device.sh OUT_DIR [SET ...]   # from the repository root, as root
#
# SET: the sets of gpu_check.sh to run (speedrun, the default; rnn; compile; step).
#
# The machine's own python3 (with torch and CUDA) runs everything; the wheels go to
# /tmp/site, the SWORD modules to /usr/share/sword (when missing), the Bible cache under
# HF_HOME=/tmp/hf.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: gpu_on_device.sh OUT_DIR}
mkdir -p "$out"
[[ -d .whl && -d .gpu ]] || {
  echo "gpu_on_device.sh: .whl/ or .gpu/ missing: run benchmarks/gpu_bundle.sh first" >&2
  exit 2
}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site
# The results files name the commit of the checkout: a copy without .git gets the packed
# clone's; an existing .git is never replaced: where its HEAD is another commit but the files
# are the packed commit's, git reads the packed clone (GIT_DIR), so the files name that commit.
if [[ ! -e .git ]]; then
  cp -r .gpu/repo/.git .git && git reset -q
elif [[ "$(git rev-parse HEAD 2>/dev/null)" != "$(git -C .gpu/repo rev-parse HEAD)" ]]; then
  if git --git-dir=.gpu/repo/.git --work-tree=. diff --quiet HEAD --; then
    # the files are the packed commit's under an older .git (a copy's): name the packed commit
    export GIT_DIR=$PWD/.gpu/repo/.git GIT_WORK_TREE=$PWD
  else
    echo "gpu_on_device.sh: this checkout's HEAD is not the packed one; the results name this HEAD" >&2
  fi
fi
[[ -d /usr/share/sword ]] || cp -r .gpu/sword /usr/share/sword
export HF_HOME=/tmp/hf HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 RESULTS=/tmp/gpu_results PYTHON=python3
mkdir -p "$HF_HOME/hfattn" "$RESULTS" && cp -r .gpu/hf/hfattn/. "$HF_HOME/hfattn/"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'

pack() { tar czf "$out/part.tgz" -C "$RESULTS" . 2>/dev/null && mv "$out/part.tgz" "$out/gpu.tgz"; }
(while sleep 15; do pack; done) &
packer=$!
bash benchmarks/gpu_check.sh "${@:2}" >"$out/log.txt" 2>&1
status=$?
kill "$packer" 2>/dev/null
wait "$packer" 2>/dev/null
pack
grep -E "^== |^\| training|^\| MFU|teacher-forced|hardware|target tokens/s|test_bleu|wall_s" "$out/log.txt" | cut -c1-250
echo "gpu_check.sh exit $status (failed steps); results in $out/gpu.tgz"
exit "$status"
