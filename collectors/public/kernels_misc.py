"""Smaller kernel sources: measured matmul ceilings (MAMF), the collectors' own micro-benchmarks,
a FlashAttention-2 forward table on A100 and NeuSight's fp16 bmm check on H100.

- ml_engineering_mamf_matmul.csv (stas00/ml-engineering compute/accelerator/README.md): the maximum
  achievable matmul TFLOP/s per accelerator at its best shape (mamf-finder.py: torch.mm, mean of
  100 iterations after 50 warm-up per shape). The CSV labels every row "FP8", but the README holds
  two tables: the first BF16 (its theoretical column is the BF16 dense peak: A100 312, H100 989,
  B200 2250; the A100 has no FP8), the second FP8 (H100 1979, B200 4500).
  `collectors.public.ml_engineering.read_mamf_matmul` tells them apart by the table order; a row
  is one call of the best shape, time_s = 2 M N K / (mamf_tflops 1e12). Accelerators without a
  catalog entry (A100 PCIe of unstated memory, MI355X) are skipped.
- datasets/raw/microbench__*.parquet (perfmodel's collectors, `collectors/microbench.py`): square
  matmuls per dtype, the device memory copy (read + write) and causal SDPA forward + backward, on
  the hosts measured (CPU hosts: gpu 'cpu' with their hardware_id).
- liangan1/GPU_travel performance/flash-attn/README.md @ 07d0469e: FlashAttention-2 forward on one
  A100 (SM80), 32 query heads x head_dim 128 (the stated TFLOP/s x ms = 4 b h s^2 d), causal and not,
  32 or 8 kv heads. The README does not name the 16-bit dtype; A100's fp16 and bf16 peaks are the
  same (312 TFLOP/s), so the row says fp16, flash-attention's benchmark default.
- sitar-lab/NeuSight scripts/asplos/fp16mm.csv (fp16mm_exp.py): 9 torch.bmm timings in fp16 on H100
  (device config NVIDIA_H100_80GB_HBM3), (B, M, N) @ (B, N, K), mean of the fastest 5 of 25 calls.
- fxmarty/efficient-attention-benchmark README.md @ 3335822 (PyTorch 2.1.0.dev20230306, one
  A100-SXM4-80GB, fp16): the eager attention (`softmax(q @ k^T / sqrt(d)) @ v`, softmax in fp16, no
  mask) over batch 8/16/64 x seq 64-1024 x head_dim 32/64/128 x heads 12/16/24; its "Forward
  benchmark" table (benchmark.py: under inference_mode, dropout p = 0, a no-op) and its "Benchmark
  forward + backward" table (the grid of benchmark_training.py at 423c3fb: q, k, v parameters,
  dropout p = 0.1 on the probabilities, `.sum().backward()`, CUDA events over 30 iterations). Two
  sources (each its own timing protocol: one has a host-bound floor of 0.1 ms, the other 0.55 ms).
  The tables' SDPA ("PT native") columns are not imported: that nightly's SDPA ran FlashAttention
  v1 (FlashAttention-2 reached PyTorch in 2.2), not the kernel the 'flash' variant prices.
"""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import pandas as pd

from collectors.kernel_bench import BENCH_PREFIX
from collectors.kernel_bench import work_of as kernel_work_of
from collectors.public.kernel_rows import KernelImport
from collectors.public.ml_engineering import read_mamf_matmul
from perfmodel.errors import DataError
from perfmodel.kernels import work as W

FA2_A100 = (
    # (causal, batch, seqlen_q, seqlen_kv, kv_heads, TFLOP/s, ms): the second table of the README
    (True, 16, 1024, 1024, 32, 143.70, 0.956), (True, 16, 1024, 1024, 8, 140.59, 0.978),
    (True, 4, 1024, 4096, 32, 171.0, 1.401), (True, 4, 1024, 4096, 8, 174.7, 1.377),
    (True, 1, 4096, 4096, 32, 156.27, 0.879), (True, 1, 4096, 4096, 8, 159.41, 0.862),
    (False, 16, 1024, 1024, 32, 179.11, 1.535), (False, 16, 1024, 1024, 8, 179.48, 1.532),
    (False, 4, 1024, 4096, 32, 179.89, 1.528), (False, 4, 1024, 4096, 8, 182.60, 1.505),
    (False, 1, 4096, 4096, 32, 184.04, 1.494), (False, 1, 4096, 4096, 8, 183.63, 1.497),
)  # fmt: skip
FA2_CITATION = "liangan1/GPU_travel@07d0469e8af6ebe7d66ed1bcbc88ff86bae025d4:performance/flash-attn/README.md"
FP16MM_COMMIT = "6945927d9afcca2b9daf021f8395e53edc5b4eef"
FP16MM_CITATION = f"sitar-lab/NeuSight@{FP16MM_COMMIT}:scripts/asplos/fp16mm.csv"
EAGER_ATTENTION_COMMIT = "3335822290b0d498f85f92b91a42f92aca640352"
EAGER_ATTENTION_CITATION = f"fxmarty/efficient-attention-benchmark@{EAGER_ATTENTION_COMMIT}:README.md"
EAGER_ATTENTION_TABLES = {
    "## Forward benchmark": ("fxmarty_eager_attention_forward_a100", "forward", W.SCORES_NATIVE_SOFTMAX),
    "## Benchmark forward + backward": (
        "fxmarty_eager_attention_training_a100",
        "full",
        W.SCORES_NATIVE_SOFTMAX | W.SCORES_DROPOUT,
    ),
}
"""README section -> (source, phase, attention_work score flags)."""


def import_mamf(path: str | Path) -> KernelImport:
    out = KernelImport("ml_engineering_mamf_matmul")
    for r in read_mamf_matmul(path).to_dict("records"):
        if pd.isna(r["gpu"]):
            out.skip(f"accelerator without a catalog entry: {r['accelerator_raw']}")
            continue
        m, n, k = (int(v) for v in str(r["best_shape_mxnxk"]).split("x"))
        work = W.matmul_work(m, n, k, str(r["dtype"]))
        out.add(
            work,
            gpu=str(r["gpu"]),
            time_s=work.flops / (float(r["mamf_tflops"]) * 1e12),
            citation=str(r["citation"]),
            identity={
                "accelerator": r["accelerator_raw"],
                "dtype": r["dtype"],
                "shape": r["best_shape_mxnxk"],
            },
            gpu_name_raw=str(r["accelerator_raw"]),
            provider_raw="torch.mm",
            kernel_name_raw="mamf-finder best shape",
            torch_version=str(r["torch_version"]),
            notes=f"{r['mamf_tflops']} TFLOP/s at the best of a shape search (time = 2MNK / TFLOP/s); "
            f"dtype from the README's table order (the CSV says FP8 for both); {r['notes'] or ''}".strip(),
        )
    return out


def import_microbench(raw_dir: str | Path) -> KernelImport:
    out = KernelImport("perfmodel-collector")
    shards = sorted(Path(raw_dir).glob("microbench__*.parquet"))
    for shard in shards:
        for r in pd.read_parquet(shard).to_dict("records"):
            kernel = str(r["bench"]).startswith(BENCH_PREFIX)
            if (
                r["status"] != "ok"
                or not r["median_time_s"]
                or (r["bench"] not in ("matmul", "hbm_copy", "attention") and not kernel)
            ):
                out.skip(f"{r['bench']} {r['status']}")
                continue
            if kernel and r["gpu"] == "cpu":
                # a CPU's eager modules would move the kind factors every accelerator shares
                out.skip("kernel benchmark on a CPU (the kind factors are fitted on accelerators)")
                continue
            dtype = str(r["dtype"])
            if kernel:
                work = kernel_work_of(str(r["bench"]), dtype, str(r["shape"]))
            elif r["bench"] == "matmul":
                n = int(str(r["shape"]).split("x")[0])
                work = W.matmul_work(n, n, n, dtype)
            elif r["bench"] == "hbm_copy":
                elements = int(str(r["shape"]).removesuffix("MB")) * 10**6 // 4
                work = W.elementwise_work(elements, dtype, variant="copy", inputs=1, outputs=1)
            else:
                b, h, s, d = (int(v) for v in str(r["shape"]).split("x"))
                work = W.attention_work(b, h, s, s, d, dtype, causal=True, variant="flash", phase="full")
            out.add(
                work,
                gpu=str(r["gpu"]),
                time_s=float(r["median_time_s"]),
                citation=f"perfmodel collectors/microbench.py {r['collector_version']} ({shard.name})",
                identity={"shard": shard.name, "bench": r["bench"], "dtype": dtype, "shape": r["shape"]},
                hardware_id=str(r["hardware_id"]),
                gpu_name_raw=str(r["device_name"]),
                provider_raw=f"collector {r['bench']}",
                kernel_name_raw=str(r["bench"]),
                measured_at=str(r["collected_at"]),
                notes="median of 10 samples after warm-up"
                + ("; SDPA forward + backward, causal" if r["bench"] == "attention" else "")
                + ("; eager module timed back to back (collectors/kernel_bench.py)" if kernel else ""),
            )
    return out


def import_flash_attention_a100() -> KernelImport:
    out = KernelImport("flash_attention2_a100_gpu_travel")
    heads, head_dim = 32, 128
    for causal, batch, s_q, s_kv, kv_heads, tflops, ms in FA2_A100:
        work = W.attention_work(batch, heads, s_q, s_kv, head_dim, "fp16", causal=causal, variant="flash")
        out.add(
            work,
            gpu="A100-80GB",
            time_s=ms / 1e3,
            citation=FA2_CITATION,
            identity={"causal": causal, "batch": batch, "s_q": s_q, "s_kv": s_kv, "kv_heads": kv_heads},
            gpu_name_raw="A100 (SM80)",
            provider_raw="flash-attn 2 forward",
            kernel_name_raw="flash_attn_func",
            notes=f"{tflops} TFLOP/s as published; heads 32 x head_dim 128 from TFLOP/s x ms; kv_heads {kv_heads}; "
            "A100 memory size not stated (SXM 40/80 GB share clocks and peaks); 16-bit dtype not stated",
        )
    return out


def _git_show(repo: str | Path, commit: str, path: str) -> str:
    git = Path(repo) / ".git" if (Path(repo) / ".git").exists() else Path(repo)
    return subprocess.run(
        ["git", "--git-dir", str(git), "show", f"{commit}:{path}"], check=True, capture_output=True, text=True
    ).stdout


def read_eager_attention_tables(readme: str) -> dict[str, list[dict[str, float]]]:
    """The README's Markdown tables by section heading: rows of bs, seqlen, headdim, nheads and the
    eager attention's ms per call."""
    out: dict[str, list[dict[str, float]]] = {}
    section = None
    for line in readme.splitlines():
        if line.startswith("## "):
            section = line.strip()
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if section is None or not line.startswith("|") or not cells[0].isdigit():
            continue
        bs, seqlen, headdim, nheads = (int(c) for c in cells[:4])
        out.setdefault(section, []).append(
            {"bs": bs, "seqlen": seqlen, "headdim": headdim, "nheads": nheads, "eager_ms": float(cells[4])}
        )
    return out


def import_eager_attention_a100(repo: str | Path) -> list[KernelImport]:
    """Both tables of fxmarty/efficient-attention-benchmark's README (module docstring), one source each."""
    return eager_attention_imports(_git_show(repo, EAGER_ATTENTION_COMMIT, "README.md"))


def eager_attention_imports(readme: str) -> list[KernelImport]:
    """`import_eager_attention_a100` on the README's text."""
    tables = read_eager_attention_tables(readme)
    results = []
    for heading, (source, phase, flags) in EAGER_ATTENTION_TABLES.items():
        out = KernelImport(source)
        rows = tables.get(heading, [])
        if not rows:
            raise DataError(f"{EAGER_ATTENTION_CITATION}: no table under {heading!r}")
        for r in rows:
            work = W.attention_work(
                int(r["bs"]), int(r["nheads"]), int(r["seqlen"]), int(r["seqlen"]), int(r["headdim"]), "fp16",
                causal=False, variant="math", phase=phase, scores=flags,
            )  # fmt: skip
            out.add(
                work,
                gpu="A100-80GB",
                time_s=float(r["eager_ms"]) / 1e3,
                citation=EAGER_ATTENTION_CITATION,
                identity={k: r[k] for k in ("bs", "seqlen", "headdim", "nheads")},
                gpu_name_raw="NVIDIA A100-SXM4-80GB",
                provider_raw="PyTorch 2.1.0.dev20230306+cu117 eager",
                kernel_name_raw="attention_pytorch_eager",
                torch_version="2.1.0.dev20230306+cu117",
                notes=f"{heading.removeprefix('## ')}: q @ k^T / sqrt(d), softmax in fp16, "
                + (
                    "dropout p 0.1, .sum().backward(); CUDA events, mean of 30"
                    if phase == "full"
                    else "inference_mode"
                ),
            )
        results.append(out)
    return results


def import_neusight_fp16mm(repo: str | Path) -> KernelImport:
    out = KernelImport("neusight_fp16mm_h100")
    text = _git_show(repo, FP16MM_COMMIT, "scripts/asplos/fp16mm.csv")
    for r in pd.read_csv(io.StringIO(text)).to_dict("records"):
        b, m, n, k = (int(r[c]) for c in "BMNK")
        work = W.matmul_work(m, k, n, "fp16", batch=b)
        out.add(
            work,
            gpu="H100-SXM",
            time_s=float(r["Latency"]) / 1e3,
            citation=FP16MM_CITATION,
            identity={"B": b, "M": m, "N": n, "K": k},
            gpu_name_raw="NVIDIA_H100_80GB_HBM3",
            provider_raw="torch.bmm",
            kernel_name_raw="fp16mm_exp.py",
            notes="(B, M, N) @ (B, N, K) in fp16, forward, mean of the fastest 5 of 25 calls (fp16mm_exp.py)",
        )
    return out
