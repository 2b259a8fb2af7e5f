#!/usr/bin/env bash
# All lab runs, one at a time (the machine is shared). Usage: bash run_all.sh [SIZE...]
set -u
cd "$(dirname "$0")"
PY=.venv-ludwig/bin/python
mkdir -p logs runs
run() {  # name config dataset [extra args]
  local name=$1 cfg=$2 ds=$3; shift 3
  if [[ -f runs/$name.json && -z "${FORCE:-}" ]]; then echo "skip $name"; return; fi
  # Gate: the machine is shared; wait (up to GATE_MAX_S) until the 1-minute load average is below
  # GATE_LOAD, so that the measurement is not dominated by other people's processes.
  local waited=0
  while awk -v g="${GATE_LOAD:-2.5}" '{exit !($1 >= g)}' /proc/loadavg && (( waited < ${GATE_MAX_S:-900} )); do
    sleep 10; waited=$(( waited + 10 ))
  done
  echo "=== $name $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg) gate_wait ${waited}s"
  timeout 600 $PY run_ludwig.py --config "$cfg" --dataset "$ds" --name "$name" "$@" > "logs/$name.log" 2>&1 \
    && tail -1 "logs/$name.log" || { echo "FAILED $name"; tail -5 "logs/$name.log"; }
}
# wait for a run started by an earlier invocation
while pgrep -f "run_ludwig.py" > /dev/null; do sleep 5; done
# Size 2000: the configs as written (tabular 3 epochs, image/text 2 epochs, llm 500 rows 1 epoch).
# Size 4000: twice the rows; image and text with 1 epoch (same step count as at 2000, twice the rows
# to preprocess: separates per-row preprocessing from per-step time and keeps each run < ~3 min);
# tabular keeps 3 epochs (twice the steps), llm 1000 rows 1 epoch (twice the steps).
for n in "${@:-2000 4000}"; do
  e=(); [[ $n == 4000 ]] && e=(--set trainer.epochs=1)
  run ecd_tab_concat_$n            configs/ecd_tab_concat.yaml            data/tabular_$n.csv
  run ecd_tab_default_combiner_$n  configs/ecd_tab_default_combiner.yaml  data/tabular_$n.csv
  run ecd_image_stacked_cnn_$n     configs/ecd_image_stacked_cnn.yaml     data/images_$n.csv "${e[@]}"
  for enc in parallel_cnn stacked_cnn rnn transformer; do
    run ecd_text_${enc}_$n configs/ecd_text_$enc.yaml data/text_$n.csv "${e[@]}"
  done
  m=$(( n / 4 ))
  run llm_tiny_llama_lora_$m configs/llm_tiny_llama_lora.yaml data/llm_$m.csv
done
