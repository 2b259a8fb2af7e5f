#!/usr/bin/env bash
# After run_all.sh and run_steprules.sh: the tuner repeats, then retries of contended runs.
set -u
cd "$(dirname "$0")"
while pgrep -f "run_all.sh|run_steprules.sh|run_ludwig.py" > /dev/null; do sleep 5; done
PY=.venv-ludwig/bin/python
$PY tune_only.py 3 > logs/tune_only.log 2>&1; grep -v gemm_4bit logs/tune_only.log | tail -14
$PY retry_contended.py 0.3 2
