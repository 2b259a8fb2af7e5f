#!/usr/bin/env bash
# Build a Python 3.12 virtual environment with real Ludwig 0.17 for measuring Ludwig runs on CPU.
# Later meant to become `make ludwig-env`.
#
# Why these pins (checked on 2026-11, x86_64, PyPI + the machine's local wheel mirrors):
# - ludwig 0.17.10 requires Python >= 3.12 and torch>=2.11, torchaudio>=2.11, torchvision>=0.26,
#   torchcodec, transformers>=5.0, bitsandbytes>=0.44 (its wheel METADATA).
# - torchaudio's newest release on PyPI is 2.11.1, so torch must be 2.11.x (torchvision 0.26.x).
#   torchaudio 2.11.1 does NOT load beside torch 2.11.0 (libtorchaudio.so: undefined symbol
#   torch_exception_get_what_without_backtrace, raised from `import ludwig.api` via transformers),
#   and torch 2.11.1 is not on PyPI: pin torchaudio 2.11.0.
# - PyTorch's CPU-only index (download.pytorch.org/whl/cpu) is not reachable here (DNS fails), and
#   PyPI's torch for Linux x86_64 is the CUDA 13 build: it pulls nvidia-* wheels (some of them come
#   from the local mirrors /opt/pypi*; torch, triton, cudnn, cublas, nccl, cusparselt from PyPI).
#   Measured: first build 302 s wall, 5.9 GB venv; again with pip's cache warm 128 s.
#   It runs fine on a CPU-only machine. On aarch64 PyPI's torch is CPU-only and much smaller.
# - peft + accelerate are what Ludwig's `llm` model type needs for LoRA (subset of ludwig[llm]).
# - /etc/xdg/pip caps torch<=2.14.1 on these machines; 2.11 is under the cap.
set -euo pipefail

PY312="${PY312:-/root/.pyenv/versions/3.12.1/bin/python}"
VENV="${LUDWIG_VENV:-$(cd "$(dirname "$0")" && pwd)/.venv-ludwig}"

if [[ ! -x "$PY312" ]]; then
  echo "error: Python 3.12 not found at $PY312 (set PY312=/path/to/python3.12)" >&2
  exit 1
fi

start=$(date +%s)
"$PY312" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install \
  'ludwig==0.17.10' \
  'torch==2.11.0' 'torchaudio==2.11.0' 'torchvision==0.26.0' \
  'transformers==5.24.0' 'peft==0.21.2' 'accelerate==1.15.0'
end=$(date +%s)

"$VENV/bin/python" - <<'EOF'
import importlib.metadata as md
for name in ("ludwig", "torch", "torchvision", "torchaudio", "transformers", "peft", "accelerate"):
    print(f"{name}=={md.version(name)}")
import ludwig.api  # noqa: F401  (fails here if torch/torchaudio do not match)
print("import ludwig.api: ok")
EOF
echo "venv: $VENV"
echo "install_wall_s: $((end - start))"
echo "venv_size: $(du -sh "$VENV" | cut -f1)"
