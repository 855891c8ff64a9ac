#!/usr/bin/env bash
# Pack what benchmarks/gpu_check.sh needs on a GPU machine that has no network and whose
# Python (3.12, torch with CUDA) lacks hfattn's other dependencies:
#   .whl/   the wheels of the packages such an image lacks (pure Python, no dependencies
#           fetched: the image holds torch, accelerate, huggingface_hub, tokenizers, ...);
#   .gpu/   the SWORD Bible modules, hfattn's converted Bible dataset and a shallow clone of
#           this checkout's HEAD (so the results files record the commit).
# Both folders are git-ignored (.git/info/exclude); copy or carry them with the checkout, then
# run `bash benchmarks/gpu_on_device.sh OUT_DIR` there.
#
#   bash benchmarks/gpu_bundle.sh            # from the repository root, after `make sword`
#
# The converted dataset is made here first if it is missing (one `hfattn` data load).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
DEVICE_PYTHON_VERSION=${DEVICE_PYTHON_VERSION:-3.12}
WHEELS=(transformers==5.24.0 datasets==5.2.0 evaluate==0.4.6 omegaconf==2.4.0
  antlr4-python3-runtime==4.13.2 dill==0.4.1 multiprocess==0.70.19)
BUILT=(pysword==0.2.8)  # published as a source archive only: built into a wheel here

exclude=$(git rev-parse --git-path info/exclude)
for folder in /.whl/ /.gpu/; do
  grep -qxF "$folder" "$exclude" 2>/dev/null || echo "$folder" >>"$exclude"
done

rm -rf .whl && mkdir -p .whl
"$PYTHON" -m pip download -q --no-deps --only-binary=:all: --dest .whl \
  --python-version "$DEVICE_PYTHON_VERSION" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform any \
  "${WHEELS[@]}" 2>&1 | grep -v "^WARNING" || true
"$PYTHON" -m pip wheel -q --no-deps --wheel-dir .whl "${BUILT[@]}" 2>&1 | grep -v "^WARNING" || true
for wheel in "${WHEELS[@]}" "${BUILT[@]}"; do
  name=${wheel%%==*}
  ls .whl | grep -qi "^${name//-/_}-" || {
    echo "gpu_bundle.sh: no wheel of $wheel in .whl/" >&2
    exit 1
  }
done

cache=$(PYTHONPATH=$PWD "$PYTHON" -c '
from hfattn.data.bible import cache_path, load_bible
load_bible()  # converts the modules on the first call
print(cache_path())')
rm -rf .gpu && mkdir -p .gpu/hf/hfattn
cp -r /usr/share/sword .gpu/sword
cp -r "$cache" .gpu/hf/hfattn/
# datasets' own map caches (cache-*.arrow) beside the splits are derived data: leave them out
find .gpu/hf -name 'cache-*.arrow' -delete
git clone -q --depth 1 "file://$PWD" .gpu/repo
du -sh .whl .gpu
echo "gpu_bundle.sh: on the GPU machine run: bash benchmarks/gpu_on_device.sh OUT_DIR"
