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

from collectors.public._common import ImportResult, RowSink, parse_int, parse_number, read_csv


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
        seq = 2048
        row = {
            "citation": r["source"] + (f" line {r['line']}" if r["line"] else "") + f" ({r['section']})",
            "hardware_id": "Jean Zay A100 80GB (8 GPUs/node)",
            "notes": f"step_time_s = published Sec/it; {r['notes']}; TFLOPs {r['col_TFLOPs']} (hardware, incl. recompute)",
            "model_name": "bloom-176b",
            "model_family": "bloom",
            "arch": "decoder",
            "seq_len": seq,
            "micro_batch_size": mbs,
            "grad_accum_steps": gbs // (mbs * dp),  # type: ignore[operator]
            "global_batch_size": gbs,
            "precision": "amp_bf16",
            "optimizer": "adamw",
            "activation_checkpointing": True,
            "includes_optimizer_step": True,
            "gpu": "A100-80GB",
            "gpu_name_raw": "A100 80GB",
            "num_gpus": n_gpus,
            "num_nodes": parse_int(r["col_Nodes"]),
            "strategy": None,  # ZeRO stage of these log lines not stated
            "tensor_parallel": tp,
            "pipeline_parallel": pp,
            "context_parallel": 1,
            "framework": "megatron-deepspeed",
            "step_time_s": step,
            "tokens_per_s": gbs * seq / step,  # type: ignore[operator]
            "samples_per_s": gbs / step,  # type: ignore[operator]
            "achieved_tflops_per_gpu": None,
        }
        sink.add(row, config={k: r[k] for k in ("source", "line", "section", "col_GBS", "col_Sec_per_it")})
    return sink.result()
