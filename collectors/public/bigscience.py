"""BigScience BLOOM-176B throughput: topology benchmark tables and the real run's log lines.

Normalisation:
- step_time_s = the published "Sec/it" (elapsed time per iteration of one global batch).
- The two log lines of the real BLOOM-176B run (README: 384 A100 80GB, TP 4, PP 12, DP 8,
  MBS 2, bf16, seq 2048) are imported with model_name bloom-176b (dims from the catalog);
  bf16 under Megatron-DeepSpeed keeps fp32 master weights -> amp_bf16. Activation
  checkpointing: on (the note's "4*2 coefficient, activation checkpointing").
- The topology experiment tables (chronicles-prequel.md) do not state the precision per table
  (the document compares fp16 and bf16), and their model dims change from table to table in
  the surrounding text; they are skipped with that reason rather than guessed.
"""

from __future__ import annotations

from pathlib import Path

from collectors.public._common import Batch, ImportResult, Layout, RowSink, parse_int, parse_number, read_csv


def import_bigscience_bloom176b_throughput(path: str | Path) -> ImportResult:
    path = Path(path)
    sink = RowSink(path.stem)
    for _, r in read_csv(path).iterrows():
        if "BLOOM-176B" not in r["notes"]:
            sink.skip("topology experiment table: precision and model dims not stated per table")
            continue
        n_gpus = parse_int(r["col_GPUs"])
        dp, tp, pp = parse_int(r["col_DP"]), parse_int(r["col_TP"]), parse_int(r["col_PP"])
        mbs, gbs = parse_int(r["col_MBS"]), parse_int(r["col_GBS"])
        step = parse_number(r["col_Sec_per_it"])
        if not all((n_gpus, dp, tp, pp, mbs, gbs, step)) or dp * tp * pp != n_gpus:  # type: ignore[operator]
            sink.skip("incomplete or inconsistent parallel config")
            continue
        if gbs % (mbs * dp):  # type: ignore[operator]
            sink.skip("global batch not divisible by micro batch x DP")
            continue
        sink.add(
            config={k: r[k] for k in ("source", "line", "section", "col_GBS", "col_Sec_per_it")},
            citation=r["source"] + (f" line {r['line']}" if r["line"] else "") + f" ({r['section']})",
            hardware_id="Jean Zay A100 80GB (8 GPUs/node)",
            notes=f"step_time_s = published Sec/it; {r['notes']}; TFLOPs {r['col_TFLOPs']} (hardware, incl. recompute)",
            model=("bloom-176b", "bloom"),
            batch=Batch(mbs, gbs, 2048, gbs // (mbs * dp)),  # type: ignore[operator]
            precision="amp_bf16",
            activation_checkpointing=True,
            # strategy None: the ZeRO stage of these log lines is not stated
            layout=Layout(
                "A100-80GB",
                n_gpus,
                None,
                tp,
                pp,
                num_nodes=parse_int(r["col_Nodes"]),
                gpu_name_raw="A100 80GB",
            ),
            framework="megatron-deepspeed",
            step_time_s=step,
        )
    return sink.result()
