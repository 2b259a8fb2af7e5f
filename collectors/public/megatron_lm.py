"""Megatron-LM README scaling tables (three of them transcribed from images; see the README).

Only achieved TFLOP/s per GPU is published, so the step time is derived with the FLOP formula
the table itself used:
- Apr-2021 table (A100 80GB, Selene): Narayanan et al. 2021 (arXiv 2104.04473) eq. 3, which
  counts activation recomputation:  F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)).
- 2024 H100 weak-scaling table (Megatron-Core r0.8.0): Megatron-LM training.py
  num_floating_point_operations for a standard GPT (MHA, 4h MLP, no recomputation counted):
  F = 72 B s l h^2 (1 + s/(6h) + V/(12 l h))  (= 6N + 12 L d s per token, perfmodel's convention).
  step_time_s = F / (achieved_tflops_per_gpu * 1e12 * num_gpus).
- Apr-2021 rows give only the combined model-parallel size; TP = min(MP, 8) and PP = MP / TP is
  the split of arXiv 2104.04473 Table 1 (tensor parallel inside an 8-GPU node). Attention heads
  are not in that table version; they are taken from the Jan-2021 table of the same README for
  the same width (they do not change the FLOP count).
- precision: "half precision (mixed)" -> amp_fp16 (Megatron-LM 2021 fp16 mixed precision); the
  H100 table states none, but its MFU = achieved / 989 TFLOP/s, the H100 SXM dense BF16 peak, so
  amp_bf16 (checked per row within 3 %).
- Every row is currently skipped: the README never states the micro-batch size, which the
  schema requires (the derivation above is kept for when it does).
- Also skipped: the Jan-2021 table and the GPT-3 example text (A100 memory size not stated), the
  MFU/HFU table (no GPU count or batch), the strong-scaling end points (MFU only, parallel
  config not stated).
"""

from __future__ import annotations

import re
from pathlib import Path

from collectors.public._common import (
    Batch,
    ImportResult,
    Layout,
    RowSink,
    parse_int,
    parse_number,
    parse_percent,
    read_csv,
)

H100_BF16_PEAK_TFLOPS = 989.0


def _flops_2021(b: int, s: int, layers: int, h: int, v: int) -> float:
    return 96 * b * s * layers * h * h * (1 + s / (6 * h) + v / (16 * layers * h))


def _flops_mcore(b: int, s: int, layers: int, h: int, v: int) -> float:
    return 72 * b * s * layers * h * h * (1 + s / (6 * h) + v / (12 * layers * h))


def import_megatron_lm_readme_scaling(path: str | Path) -> ImportResult:
    path = Path(path)
    sink = RowSink(path.stem)
    frame = read_csv(path)
    jan = frame[frame["table"] == "cases (Jan 2021)"]
    heads_by_width = {int(r["d_model"]): int(r["n_heads"]) for _, r in jan.iterrows() if r["n_heads"]}
    for _, r in frame.iterrows():
        table = r["table"]
        if table == "cases (Jan 2021)" or table == "GPT-3 example text":
            sink.skip("A100 memory size not stated")
            continue
        if table.startswith("MFU/HFU"):
            sink.skip("no GPU count or batch size")
            continue
        if table.startswith("Strong scaling"):
            sink.skip("MFU end point only; parallel config not stated")
            continue
        n = parse_int(r["n_gpus"])
        gbs = parse_int(r["global_batch_size"])
        seq = parse_int(r["seq_len"])
        layers = parse_int(r["n_layers"])
        width = parse_int(r["d_model"])
        vocab = parse_int(r["vocab_size"])
        tflops = parse_number(r["achieved_tflops_per_gpu"])
        if not all((n, gbs, seq, layers, width, vocab, tflops)):
            sink.skip("missing dims, batch, GPU count or TFLOPs")
            continue
        if table == "cases (Apr 2021)":
            match = re.search(r"model-parallel size (\d+)", r["parallelism"])
            if not match:
                sink.skip("model-parallel size not given")
                continue
            mp = int(match.group(1))
            tp, pp = min(mp, 8), mp // min(mp, 8)
            heads = parse_int(r["n_heads"]) or heads_by_width.get(width)  # type: ignore[arg-type]
            flops = _flops_2021(gbs, seq, layers, width, vocab)  # type: ignore[arg-type]
            precision, gpu, formula = (
                "amp_fp16",
                "A100-80GB",
                "96*B*s*l*h^2*(1+s/6h+V/16lh) (arXiv 2104.04473 eq. 3)",
            )
            strategy = "ddp"
            extra = f"; TP/PP split of MP={mp} as in arXiv 2104.04473 Table 1; heads from the Jan-2021 table (same width)"
            mfu = None
        else:
            tp, pp = parse_int(r["tp"]) or 1, parse_int(r["pp"]) or 1
            heads = parse_int(r["n_heads"])
            mfu = parse_percent(r["mfu"])
            if mfu is None or abs(tflops / mfu / H100_BF16_PEAK_TFLOPS - 1) > 0.03:  # type: ignore[operator]
                sink.skip("precision not stated and MFU does not identify it")
                continue
            flops = _flops_mcore(gbs, seq, layers, width, vocab)  # type: ignore[arg-type]
            precision, gpu, formula = (
                "amp_bf16",
                "H100-SXM",
                "72*B*s*l*h^2*(1+s/6h+V/12lh) (Megatron training.py, no recompute)",
            )
            strategy = None
            extra = "; precision inferred: MFU = achieved/989 TFLOPs (H100 SXM dense BF16)"
        if not heads or n % (tp * pp):  # type: ignore[operator]
            sink.skip("attention heads unknown or GPU count not divisible by TP x PP")
            continue
        mbs = parse_int(r.get("micro_batch_size", ""))
        if mbs is None:
            sink.skip("micro batch size not stated (the schema requires it)")
            continue
        step = flops / (tflops * 1e12 * n)  # type: ignore[operator]
        dp = n // (tp * pp)  # type: ignore[operator]
        sink.add(
            config={k: r[k] for k in ("source", "table", "model", "n_gpus", "global_batch_size")},
            citation=r["source"],
            hardware_id=r["gpu"],
            notes=f"step_time_s = FLOPs/(achieved_tflops*GPUs) with F = {formula}; {r['notes']}{extra}",
            model=(f"gpt-{r['params_billion']}b" if r["params_billion"] else r["model"], "gpt"),
            params_total=float(r["params_billion"]) * 1e9 if r["params_billion"] else None,
            hidden_size=width,
            num_layers=layers,
            num_heads=heads,
            num_kv_heads=heads,
            ffn_hidden_size=4 * width,  # type: ignore[operator]
            vocab_size=vocab,
            gated_mlp=False,
            num_experts=1,
            experts_per_token=1,
            batch=Batch(mbs, gbs, seq, gbs // (mbs * dp) if gbs % (mbs * dp) == 0 else None),
            precision=precision,
            layout=Layout(gpu, n, strategy, tp, pp, gpu_name_raw=r["gpu"]),
            framework="megatron",
            step_time_s=step,
            reported_mfu=mfu,
        )
    return sink.result()
