"""`perfmodel gpus` and `perfmodel models`: what the catalogs hold."""

from __future__ import annotations

import dataclasses
from typing import Any

import typer

from perfmodel.cli import _common


def register(app: typer.Typer) -> None:
    app.command("gpus")(gpus_command)
    app.command("models")(models_command)


def gpus_command(json_out: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """List the accelerators perfmodel knows (dense peak TFLOP/s, memory, bandwidth)."""
    from perfmodel.catalog import get_gpu, gpu_names

    specs = [get_gpu(name) for name in gpu_names()]
    if json_out:
        _common.print_json([dataclasses.asdict(s) for s in specs])
        return
    from rich.table import Table

    table = Table(title=f"{len(specs)} accelerators (dense peaks; `cpu` = this machine)")
    for col in ("name", "generation", "memory GB", "HBM GB/s", "fp32", "tf32", "bf16", "fp16", "fp8", "link GB/s", "TDP W"):
        table.add_column(col, justify="left" if col in ("name", "generation") else "right")
    for s in specs:
        peaks = [f"{s.peak_tflops[k]:g}" if s.peak_tflops.get(k) else "-" for k in ("fp32", "tf32", "bf16", "fp16", "fp8")]
        table.add_row(
            s.name,
            s.generation[:28],
            f"{s.memory_gb:g}",
            f"{s.hbm_bandwidth_gb_per_s:g}",
            *peaks,
            f"{s.intra_node_bandwidth_gb_per_s:g}",
            f"{s.tdp_w:g}" if s.tdp_w else "-",
        )
    _common.stdout_console().print(table)


def models_command(json_out: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """List the model architectures in the catalog (also accepted: Hugging Face ids, config.json paths)."""
    from perfmodel.analytic.params import count_params
    from perfmodel.catalog import get_model, model_entry, model_names

    rows: list[dict[str, Any]] = []
    for name in model_names():
        spec = get_model(name)
        entry = model_entry(name)
        rows.append(
            {
                "name": name,
                "hf_id": entry.get("hf_id"),
                "family": spec.family,
                "arch": spec.arch,
                "params_total": count_params(spec).total,
                "hidden_size": spec.hidden_size,
                "num_layers": spec.num_layers,
                "num_heads": spec.num_heads,
                "num_experts": spec.num_experts,
                "source": spec.source,
            }
        )
    if json_out:
        _common.print_json(rows)
        return
    from rich.table import Table

    from perfmodel.cli.render import fmt_number

    table = Table(title=f"{len(rows)} model architectures")
    for col in ("name", "hf id", "family", "arch", "params", "d", "layers", "heads"):
        table.add_column(col, justify="right" if col in ("params", "d", "layers", "heads") else "left")
    for r in rows:
        table.add_row(
            r["name"],
            str(r["hf_id"] or ""),
            r["family"],
            r["arch"] + (f" (MoE x{r['num_experts']})" if (r["num_experts"] or 1) > 1 else ""),
            fmt_number(r["params_total"]),
            str(r["hidden_size"] or "-"),
            str(r["num_layers"] or "-"),
            str(r["num_heads"] or "-"),
        )
    _common.stdout_console().print(table)
