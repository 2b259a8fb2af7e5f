"""Importers of published training-throughput tables (shared/data/public/) into the feature schema.

One module per source family; each `import_<source>(path) -> ImportResult` returns rows that
conform to `perfmodel.schema` and a Counter of skipped source rows by reason. `import_all` runs
every importer found in a folder; `write_public` writes one parquet per source, the MAMF matmul
ceilings, and IMPORT_REPORT.md (rows kept, skip reasons, rows per GPU).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from collectors.public._common import ImportResult
from collectors.public.bigscience import import_bigscience_bloom176b_throughput
from collectors.public.dgxc import (
    import_nvidia_dgxc_benchmarking_configs,
    import_nvidia_dgxc_benchmarking_step_times,
)
from collectors.public.dle import import_nvidia_deeplearningexamples_readme_train
from collectors.public.flash_attention import import_flash_attention_training_speed
from collectors.public.hf_docs import import_hf_transformers_perf_docs
from collectors.public.lambda_labs import import_lambda_deeplearning_benchmark_pytorch
from collectors.public.megatron_lm import import_megatron_lm_readme_scaling
from collectors.public.ml_engineering import (
    export_mamf_matmul,
    import_ml_engineering_llama31_8b_h200_vs_b200,
    import_ml_engineering_mamf_matmul,
)
from collectors.public.ml_engineering_compile import import_ml_engineering_torch_compile_b200
from collectors.public.mosaicml import (
    import_mosaicml_examples_mosaicgpt_benchmarks,
    import_mosaicml_llm_foundry_branch_experiments,
    import_mosaicml_llm_foundry_mpt_benchmarks,
)
from collectors.public.nemo import (
    import_nvidia_nemo_automodel_perf_summary,
    import_nvidia_nemo_long_sequence_cp,
    import_nvidia_nemo_megatron_bridge_perf_summary,
)
from collectors.public.neusight import import_neusight_measured_e2e_latency
from collectors.public.not_per_step import (
    import_deepspeed_blog_datapoints,
    import_mlperf_training_results_runs,
    import_modded_nanogpt_speedrun_records,
)
from collectors.public.peft import import_peft_method_comparison
from collectors.public.timm import import_timm_benchmark_train
from collectors.public.torchao import import_torchao_readme_benchmarks
from collectors.public.torchtitan import import_torchtitan_benchmarks
from collectors.public.unsloth import import_unsloth_readme_benchmarks
from perfmodel.errors import DataError
from perfmodel.paths import public_dir as default_out
from perfmodel.paths import shared_public_data_dir

__all__ = ["IMPORTERS", "ImportResult", "import_all", "write_public", "default_public_dir"]

IMPORTERS: dict[str, Callable[[Path], ImportResult]] = {
    "mosaicml_llm_foundry_mpt_benchmarks": import_mosaicml_llm_foundry_mpt_benchmarks,
    "mosaicml_examples_mosaicgpt_benchmarks": import_mosaicml_examples_mosaicgpt_benchmarks,
    "mosaicml_llm_foundry_branch_experiments": import_mosaicml_llm_foundry_branch_experiments,
    "torchtitan_benchmarks": import_torchtitan_benchmarks,
    "megatron_lm_readme_scaling": import_megatron_lm_readme_scaling,
    "nvidia_nemo_megatron_bridge_perf_summary": import_nvidia_nemo_megatron_bridge_perf_summary,
    "nvidia_nemo_automodel_perf_summary": import_nvidia_nemo_automodel_perf_summary,
    "nvidia_nemo_long_sequence_cp": import_nvidia_nemo_long_sequence_cp,
    "nvidia_dgxc_benchmarking_step_times": import_nvidia_dgxc_benchmarking_step_times,
    "nvidia_dgxc_benchmarking_configs": import_nvidia_dgxc_benchmarking_configs,
    "bigscience_bloom176b_throughput": import_bigscience_bloom176b_throughput,
    "ml_engineering_llama31_8b_h200_vs_b200": import_ml_engineering_llama31_8b_h200_vs_b200,
    "ml_engineering_mamf_matmul": import_ml_engineering_mamf_matmul,
    "neusight_measured_e2e_latency": import_neusight_measured_e2e_latency,
    "lambda_deeplearning_benchmark_pytorch": import_lambda_deeplearning_benchmark_pytorch,
    "deepspeed_blog_datapoints": import_deepspeed_blog_datapoints,
    "mlperf_training_results_runs": import_mlperf_training_results_runs,
    "modded_nanogpt_speedrun_records": import_modded_nanogpt_speedrun_records,
    # single-GPU / single-node sources (issue 9)
    "peft_method_comparison": import_peft_method_comparison,
    "unsloth_readme_benchmarks": import_unsloth_readme_benchmarks,
    "torchao_readme_benchmarks": import_torchao_readme_benchmarks,
    "ml_engineering_torch_compile_b200": import_ml_engineering_torch_compile_b200,
    "flash_attention_training_speed": import_flash_attention_training_speed,
    "timm_benchmark_train": import_timm_benchmark_train,
    "nvidia_deeplearningexamples_readme_train": import_nvidia_deeplearningexamples_readme_train,
    "hf_transformers_perf_docs": import_hf_transformers_perf_docs,
}
MAMF_SOURCE = "ml_engineering_mamf_matmul"


def default_public_dir() -> Path:
    """The third-party tables to import: `perfmodel.paths.shared_public_data_dir()`
    ($PERFMODEL_PUBLIC_DATA, else <project root>/../shared/data/public)."""
    return shared_public_data_dir()


def import_all(public_dir: str | Path) -> dict[str, ImportResult]:
    """Run every importer whose file is in `public_dir` (files without an importer are reported
    by `write_public` as unknown)."""
    folder = Path(public_dir)
    if not folder.is_dir():
        raise DataError(f"public data folder {folder} not found; pass --public-dir PATH")
    results = {}
    for stem, importer in IMPORTERS.items():
        path = folder / f"{stem}.csv"
        if path.is_file():
            results[stem] = importer(path)
    if not results:
        raise DataError(f"no known public table in {folder} (expected e.g. {next(iter(IMPORTERS))}.csv)")
    return results


def write_public(public_dir: str | Path, out_dir: str | Path | None = None) -> dict[str, Any]:
    """Import everything, write <source>.parquet per source with rows, mamf_matmul.parquet and
    IMPORT_REPORT.md into `out_dir` (default `perfmodel.paths.public_dir()`); return the summary
    that the report shows."""
    folder = Path(public_dir)
    out = Path(out_dir) if out_dir is not None else default_out()
    out.mkdir(parents=True, exist_ok=True)
    results = import_all(folder)
    for stale in out.glob("*.parquet"):
        if stale.stem != "mamf_matmul" and (stale.stem not in results or not len(results[stale.stem])):
            stale.unlink()
    for stem, result in results.items():
        if len(result):
            result.rows.sort_values("row_id").to_parquet(
                out / f"{stem}.parquet", index=False, compression="zstd"
            )
    if (folder / f"{MAMF_SOURCE}.csv").is_file():
        export_mamf_matmul(folder / f"{MAMF_SOURCE}.csv", out)
    unknown = sorted(p.name for p in folder.glob("*.csv") if p.stem not in IMPORTERS)
    summary = summarize(results)
    summary["unknown_files"] = unknown
    (out / "IMPORT_REPORT.md").write_text(render_report(summary))
    return summary


def summarize(results: dict[str, ImportResult]) -> dict[str, Any]:
    """Rows kept and skipped (by reason) per source; rows per GPU and per source x GPU."""
    per_gpu: Counter[str] = Counter()
    sources = {}
    for stem, result in results.items():
        gpus = Counter(result.rows["gpu"].tolist()) if len(result) else Counter()
        per_gpu.update(gpus)
        sources[stem] = {
            "kept": len(result),
            "skipped": sum(result.skipped.values()),
            "skip_reasons": dict(result.skipped.most_common()),
            "gpus": dict(sorted(gpus.items())),
        }
    return {
        "total_rows": sum(s["kept"] for s in sources.values()),
        "gpu_kinds": len(per_gpu),
        "rows_per_gpu": dict(per_gpu.most_common()),
        "sources": sources,
    }


def render_report(summary: dict[str, Any]) -> str:
    lines = [
        "# Public training rows: import report",
        "",
        "Generated by `perfmodel dataset import-public` (collectors/public). Each importer's module",
        "docstring states how the source was normalised and why rows are skipped.",
        "",
        f"**{summary['total_rows']} rows** over **{summary['gpu_kinds']} accelerator kinds**.",
        "",
        "## Rows per source",
        "",
        "| source | kept | skipped | top skip reasons |",
        "|---|---:|---:|---|",
    ]
    for stem, s in summary["sources"].items():
        reasons = "; ".join(f"{reason} ({n})" for reason, n in list(s["skip_reasons"].items())[:4])
        lines.append(f"| {stem} | {s['kept']} | {s['skipped']} | {reasons} |")
    lines += ["", "## Rows per accelerator", "", "| gpu | rows |", "|---|---:|"]
    lines += [f"| {gpu} | {n} |" for gpu, n in summary["rows_per_gpu"].items()]
    lines += ["", "## Rows per source and accelerator", ""]
    for stem, s in summary["sources"].items():
        if s["gpus"]:
            lines.append(f"- {stem}: " + ", ".join(f"{g} {n}" for g, n in s["gpus"].items()))
    lines += ["", "## All skip reasons", ""]
    for stem, s in summary["sources"].items():
        if s["skip_reasons"]:
            lines.append(f"### {stem}")
            lines += [f"- {reason}: {n}" for reason, n in s["skip_reasons"].items()]
            lines.append("")
    if summary.get("unknown_files"):
        lines += ["## Files without an importer", ""] + [f"- {name}" for name in summary["unknown_files"]]
    return "\n".join(lines).rstrip() + "\n"
