#!/usr/bin/env bash
# One call on a lent GPU machine (the workplace's `device` tool): measure it with the collectors and
# bring the shards back. The machine's image has torch, pandas, pyarrow, typer, rich, scikit-learn
# and nvidia-ml-py; lightgbm is carried as a wheel (.whl, ignored by git):
#
#   here, once:  echo /.whl/ >> .git/info/exclude
#                python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#                    --implementation cp --platform manylinux_2_28_x86_64 -d .whl lightgbm==4.6.0
#   device run:  command "bash bench/device_collect.sh", carry [".whl"], timeout_s 540
#
# What it runs: `perfmodel collect --profile gpu` (micro-benchmarks first: matmul, copy, attention and
# the kernel benchmarks of collectors/kernel_bench.py, then the training slices) within BUDGET_S
# seconds (default 420: the profile's slices are skipped past it, everything measured is kept), into
# a fresh folder, packed as $OUT/raw.tgz with the log beside it. Back here:
#   tar xzf <files_at>/raw.tgz -C datasets/raw && perfmodel kernels build && perfmodel dataset build
# Off the device (no $OUT) it writes to ./device-out, so the same script runs on a CPU with
# PROFILE=quick as a dry run.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/device-out}"
mkdir -p "$OUT"
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
raw="$(mktemp -d)"
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>/dev/null || echo "no nvidia-smi"
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
  status=0
  python3 -m perfmodel collect --profile "${PROFILE:-gpu}" --out "$raw" --budget-s "${BUDGET_S:-420}" || status=$?
  python3 -m perfmodel collect --summary --out "$raw" || true
  echo "collect exit status $status"
} 2>&1 | tee "$OUT/collect.log"
tar czf "$OUT/raw.tgz" -C "$raw" .
ls -l "$OUT"
