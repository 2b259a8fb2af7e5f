"""`perfmodel gpus` and `perfmodel models`: what the catalogs hold."""

from __future__ import annotations

import dataclasses

import typer

from perfmodel.cli import _common

PEAK_PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")
"""Precisions whose dense peak TFLOP/s `perfmodel gpus` lists."""
GPU_COLUMNS: tuple[tuple[str, str], ...] = (
    ("name", "name"),
    ("generation", "generation"),
    ("memory", "memory\nGB"),
    ("hbm", "HBM\nGB/s"),
    *((p, p) for p in PEAK_PRECISIONS),
    ("link", "link\nGB/s"),
    ("tdp", "TDP\nW"),
)
"""(key, header) of the `perfmodel gpus` table."""
GPU_NARROW_DROP: tuple[tuple[str, ...], ...] = (("generation",), ("tdp",), ("tf32",))
"""Columns `perfmodel gpus` leaves out, step by step, on a terminal too narrow for all of them
(names are never cut short)."""
MODEL_COLUMNS: tuple[tuple[str, str], ...] = tuple(
    (c, c) for c in ("name", "hf id", "family", "arch", "params", "d", "layers", "heads")
)
"""(key, header) of the `perfmodel models` table."""
MODEL_NARROW_DROP: tuple[tuple[str, ...], ...] = (("hf id",), ("family",))
"""Columns `perfmodel models` leaves out, step by step, on a narrow terminal."""


def register(app: typer.Typer) -> None:
    app.command("gpus")(gpus_command)
    app.command("models")(models_command)
    app.command("frameworks")(frameworks_command)


FRAMEWORK_COLUMNS: tuple[tuple[str, str], ...] = tuple(
    (c, c) for c in ("name", "fused", "attention", "optimizer", "clip", "loss", "LoRA on", "what it is")
)
"""(key, header) of the `perfmodel frameworks` table."""


def frameworks_command(json_out: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """List the training stacks perfmodel knows, as the kernels they run (framework: NAME)."""
    # loaded when the command runs (CLI start-up)
    from perfmodel.catalog.frameworks import recipes

    found = list(recipes().values())
    if json_out:
        _common.print_json([dataclasses.asdict(r) for r in found])
        return
    # loaded when the command runs (CLI start-up)
    from perfmodel.cli.render import narrowing_table, render_title

    rows = []
    for r in found:
        fused = "/".join(r.fused) + (" +compile" if r.compile else "") if (r.fused or r.compile) else "-"
        optimizer = r.optimizer_impl + ("" if r.optimizer_state == "fp32" else f", {r.optimizer_state}")
        lora = {0: "q,v", 2: "q,v", 7: "all linear"}.get(r.lora_targets, f"{r.lora_targets} matrices")
        rows.append([r.name, fused, r.attention, optimizer, "yes" if r.grad_clip else "-", r.loss, lora, r.title])
    table = narrowing_table(FRAMEWORK_COLUMNS, rows, (("what it is",),), left=("name", "what it is"), whole=("name",))
    console = _common.stdout_console()
    render_title(
        console,
        f"{len(found)} framework recipes",
        "fused = kernel kinds run as one fused kernel; clip = the gradients' global norm clipped before each "
        "step; LoRA on = the adapted matrices a LoRA config that names none gets; an unknown name is costed "
        "as `other` (eager PyTorch)",
    )
    console.print(table)


def gpus_command(json_out: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """List the accelerators perfmodel knows (dense peak TFLOP/s, memory, bandwidth)."""
    # loaded when the command runs (CLI start-up)
    from perfmodel.catalog import get_gpu, gpu_names

    specs = [get_gpu(name) for name in gpu_names()]
    if json_out:
        _common.print_json([dataclasses.asdict(s) for s in specs])
        return
    # loaded when the command runs (CLI start-up)
    from perfmodel.cli.render import narrowing_table, render_title

    rows = []
    for s in specs:
        peaks = [f"{s.peak_tflops[k]:g}" if s.peak_tflops.get(k) else "-" for k in PEAK_PRECISIONS]
        rows.append(
            [
                s.name,
                s.generation,
                f"{s.memory_gb:g}",
                f"{s.hbm_bandwidth_gb_per_s:g}",
                *peaks,
                f"{s.intra_node_bandwidth_gb_per_s:g}",
                f"{s.tdp_w:g}" if s.tdp_w else "-",
            ]
        )
    table = narrowing_table(GPU_COLUMNS, rows, GPU_NARROW_DROP, left=("name", "generation"), whole=("name",))
    console = _common.stdout_console()
    render_title(
        console,
        f"{len(specs)} accelerators",
        "dense peak TFLOP/s per precision; link = intra-node GB/s; `cpu` = this machine",
    )
    console.print(table)


def models_command(
    json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
    timm: bool = typer.Option(False, "--timm", help="List the timm models `timm/<name>` resolves instead."),
) -> None:
    """List the model architectures in the catalog (also accepted: Hugging Face ids, config.json paths,
    timm/<name>)."""
    if timm:
        _timm_models(json_out)
        return
    # loaded when the command runs (CLI start-up)
    from perfmodel.api import model_catalog

    rows = model_catalog()
    if json_out:
        _common.print_json(rows)
        return
    # loaded when the command runs (CLI start-up)
    from perfmodel.cli.render import fmt_number, narrowing_table, render_title

    cells = [
        [
            r["name"],
            str(r["hf_id"] or ""),
            r["family"],
            r["arch"] + (f" (MoE x{r['num_experts']})" if (r["num_experts"] or 1) > 1 else ""),
            fmt_number(r["params_total"]),
            str(r["hidden_size"] or "-"),
            str(r["num_layers"] or "-"),
            str(r["num_heads"] or "-"),
        ]
        for r in rows
    ]
    left = ("name", "hf id", "family", "arch")
    table = narrowing_table(MODEL_COLUMNS, cells, MODEL_NARROW_DROP, left=left, whole=("name",))
    console = _common.stdout_console()
    render_title(
        console,
        f"{len(rows)} model architectures",
        "Hugging Face ids, config.json paths, timm/<name> work too (--timm lists those)",
    )
    console.print(table)


def _timm_models(json_out: bool) -> None:
    # loaded when the command runs (CLI start-up)
    from perfmodel.api import timm_catalog

    rows = timm_catalog()
    if json_out:
        _common.print_json(rows)
        return
    # loaded when the command runs (CLI start-up)
    from perfmodel.cli.render import fmt_number, narrowing_table, render_title

    columns = tuple((c, c) for c in ("name", "family", "arch", "params", "GFLOPs", "image"))
    cells = [
        [r["name"], r["family"], r["arch"], fmt_number(r["params_total"]), f"{r['forward_gflops_per_sample']:g}",
         f"{r['img_size']} px"]  # fmt: skip
        for r in rows
    ]
    table = narrowing_table(columns, cells, (("family",),), left=("name", "family", "arch"), whole=("name",))
    console = _common.stdout_console()
    render_title(
        console,
        f"{len(rows)} timm models",
        "model: {name: timm/<name>} or a Ludwig timm encoder; numbers at the image size the sweep trained at",
    )
    console.print(table)
