#!/usr/bin/env bash
# Step-counting rules, verified with real runs (after run_all.sh; one training at a time).
set -u
cd "$(dirname "$0")"
while pgrep -f "run_all.sh|run_ludwig.py" > /dev/null; do sleep 5; done
PY=.venv-ludwig/bin/python
# 1) 2012 rows -> ceil(0.7*2012) = 1409 training rows = 22*64 + 1: Ludwig counts ceil(1409/64) = 23 steps
#    per epoch but drops a last batch of exactly 1 sample; epochs 2 -> total_steps 46 batches.
$PY run_ludwig.py --config configs/ecd_tab_default_combiner.yaml --dataset data/tabular_2012.csv \
  --name steprule_rem1_tab_2012 --set trainer.epochs=2 > logs/steprule_rem1_tab_2012.log 2>&1; tail -1 logs/steprule_rem1_tab_2012.log
# 2) train_steps 30 with gradient_accumulation_steps 4 and checkpoints_per_epoch 2 (2000 rows, bs 64).
$PY run_ludwig.py --config configs/ecd_tab_default_combiner.yaml --dataset data/tabular_2000.csv \
  --name steprule_trainsteps30_ga4_tab_2000 --set trainer.train_steps=30 --set trainer.gradient_accumulation_steps=4 \
  --set trainer.checkpoints_per_epoch=2 > logs/steprule_trainsteps30_ga4_tab_2000.log 2>&1; tail -1 logs/steprule_trainsteps30_ga4_tab_2000.log
