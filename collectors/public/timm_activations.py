"""What each timm model of the RTX 3090 training sweep saves for backward, measured on this CPU.

The feature table's `activation_mb_per_sample` is the memory of the tensors autograd saves for
backward (perfmodel.measure.models.activation_mb_per_sample: saved-tensor hooks on a 2-sample
forward, parameters excluded, 2 bytes per element). timm's published "activations" count only the
outputs of convolutions and linear layers, about half of that for a ResNet (22 MB against 42 MB
for ResNet-50 at 224 px) and a different fraction for every architecture: an EfficientNet's batch
norms, SiLUs and squeeze-excitation products save tensors that are not conv outputs. So the CNN
plan (perfmodel.analytic.step `_cnn`: batch-norm and elementwise work over the saved tensors)
would cost the same architecture differently from the timm rows and from the catalog.

This script builds every model of the sweep at its train image size with timm 0.9.16 (the newest
series that still builds the sweep's 2022 model names; 0.6, the sweep's own, does not import on
Python 3.11; no weights downloaded), runs one forward with a cross-entropy loss in train mode on 2
random images in fp32 on the CPU under the same saved-tensor hooks, and writes one row per
(model, image size) to TABLE. collectors.public.timm reads TABLE and falls back to timm's count
(x 2) for a model missing from it, saying so in the row's notes.

    make timm-activations     # its own venv (.venv-timm: timm, torchvision); ~40 min on 2 cores

Opt-in (not in CI): timm needs torchvision, which the project's CPU torch cannot load.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TABLE = Path(__file__).with_name("timm_saved_activations.csv")
COLUMNS = ("model", "img_size", "saved_mb_per_sample", "params_m", "timm_version", "torch_version")
SOURCE = "timm_benchmark_train.csv"


def sweep_models(csv_path: Path) -> list[tuple[str, int]]:
    """(model, train image size) of every row the importer keeps (NCHW, latest version)."""
    # pandas: only this opt-in script reads the raw sweep here
    import pandas as pd

    frame = pd.read_csv(csv_path, dtype=str)
    kept = frame[(frame["in_latest_version"] == "True") & (frame["memory_layout"] == "nchw")]
    pairs = {(str(m), int(float(s))) for m, s in zip(kept["model"], kept["src_train_img_size"], strict=True) if s == s}
    return sorted(pairs)


class _TimmSlice:
    """A timm classifier with the two methods the shared measurement calls."""

    def __init__(self, model: object, image: int) -> None:
        self.model = model
        self.image = image
        self.parameters = model.parameters  # type: ignore[attr-defined]

    def synthetic_batch(self, n: int, device: object, dtype: object) -> tuple[object, object]:
        # torch: only this opt-in script's own venv has timm beside it
        import torch

        x = torch.randn(n, 3, self.image, self.image, device=device, dtype=dtype)
        return x, torch.randint(0, 1000, (n,), device=device)

    def loss(self, batch: tuple[object, object]) -> object:
        # torch: only this opt-in script's own venv has timm beside it
        import torch.nn.functional as F

        x, y = batch
        return F.cross_entropy(self.model(x), y)  # type: ignore[operator]


def measure(name: str, image: int) -> tuple[float, float]:
    """(saved MB per sample at 2 bytes per element, parameters in millions) of one timm model."""
    # timm, torch: only this opt-in script's own venv has them (timm needs torchvision)
    import timm
    import torch

    # imports torch: the same measurement the collectors make
    from perfmodel.measure.models import activation_mb_per_sample

    torch.manual_seed(0)
    model = timm.create_model(name, pretrained=False, num_classes=1000)
    model.train()
    try:
        model.set_grad_checkpointing(False)
    except (AttributeError, AssertionError):
        pass
    params_m = sum(p.numel() for p in model.parameters()) / 1e6
    return activation_mb_per_sample(_TimmSlice(model, image), "cpu", torch.float32), params_m


def measure_in_child(name: str, image: int, cap_bytes: int) -> tuple[float, float]:
    """`measure` in a forked child under an address-space cap, so that a model too large for this
    host fails alone (and its memory goes back with the child) instead of taking the run with it."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: measure, report one JSON line, exit without cleanup
        os.close(read_end)
        try:
            resource.setrlimit(resource.RLIMIT_AS, (cap_bytes, cap_bytes))
            message = {"ok": measure(name, image)}
        except BaseException as exc:  # noqa: BLE001 - everything is reported to the parent
            message = {"error": f"{type(exc).__name__}: {exc}"[:160]}
        os.write(write_end, json.dumps(message).encode())
        os._exit(0)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, 65536):
        chunks.append(chunk)
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    if not chunks:
        raise RuntimeError(f"measuring child died (wait status {status})")
    reply = json.loads(b"".join(chunks))
    if "error" in reply:
        raise RuntimeError(reply["error"])
    mb, params_m = reply["ok"]
    return float(mb), float(params_m)


def over_sweep(
    out: Path,
    columns: tuple[str, ...],
    todo: list[tuple[str, int]],
    measure: Callable[[str, int], tuple[Any, ...]],
    skip: tuple[type[BaseException], ...] = (RuntimeError,),
) -> int:
    """Append one row per (model, image size) of `todo` to the CSV `out` (header `columns` when new):
    `measure(name, image)` returns the row's values after the first two; a model it raises `skip`
    for is skipped and said so. Returns how many were skipped."""
    new = not out.is_file()
    failed = 0
    start = time.monotonic()
    with out.open("a", newline="") as f:
        writer = csv.writer(f)
        if new:
            writer.writerow(columns)
        for i, (name, image) in enumerate(todo, 1):
            try:
                values = measure(name, image)
            except skip as exc:  # cannot build, run or fit: left to the fallback
                failed += 1
                print(f"[{i}/{len(todo)}] {name} @ {image}: skipped ({type(exc).__name__}: {exc})"[:200], flush=True)
                continue
            writer.writerow((name, image, *values))
            f.flush()
            print(f"[{i}/{len(todo)}] {name} @ {image}: {values} ({time.monotonic() - start:.0f} s)", flush=True)
    return failed


def todo_of(out: Path, sweep: Path, limit: int, only: list[str] | None = None) -> list[tuple[str, int]]:
    """The sweep's (model, image size) pairs `out` has no row for yet (`only`: these models; `limit`:
    at most this many, 0 for all)."""
    done: set[tuple[str, int]] = set()
    if out.is_file():
        with out.open() as f:
            done = {(r["model"], int(r["img_size"])) for r in csv.DictReader(f)}
    todo = [p for p in sweep_models(sweep) if p not in done and (not only or p[0] in set(only))]
    return todo[:limit] if limit else todo


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", default=str(ROOT.parent / "shared" / "data" / "public" / SOURCE))
    parser.add_argument("--out", default=str(TABLE))
    parser.add_argument("--limit", type=int, default=0, help="measure at most this many models (0: all)")
    parser.add_argument(
        "--max-memory-gb",
        type=float,
        default=16.0,
        help="address-space cap per model: a model that needs more is skipped, not OOM-killed",
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    # timm, torch: only this opt-in script's own venv has them (timm needs torchvision)
    import timm
    import torch

    import perfmodel.measure.models  # noqa: F401 - imported once here, before the forks

    torch.set_num_threads(2)
    cap = int(args.max_memory_gb * 2**30)
    out = Path(args.out)
    todo = todo_of(out, Path(args.sweep), args.limit)

    def row(name: str, image: int) -> tuple[str, ...]:
        mb, params_m = measure_in_child(name, image, cap)  # RuntimeError: cannot build, run or fit under the cap
        return f"{mb:.3f}", f"{params_m:.3f}", timm.__version__, torch.__version__

    failed = over_sweep(out, COLUMNS, todo, row)
    print(f"measured {len(todo) - failed}, skipped {failed}; table: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
