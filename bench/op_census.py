"""Op census of a Hugging Face transformer training step: the kernels it launches and the bytes
its non-matmul kernels move, per layer and per token, counted by intercepting every ATen op.

This is the measurement behind the analytic model's eager-mode terms (`conventions.py`:
`EAGER_KERNELS_PER_LAYER`, `NONMATMUL_BYTES_PER_TOKEN_PER_LAYER_*`, `LOGITS_TRAFFIC_BYTES_*`).
It runs on the CPU with real `transformers` models (LlamaForCausalLM, the Llama-style decoder
users fine-tune) in bf16: which ATen ops a step dispatches, and their tensor sizes, do not depend
on the device. Per op, traffic = bytes of its tensor inputs + bytes of its outputs (each read and
written once: no cache reuse), view ops are free (no kernel), matmuls and attention are counted
apart (the roofline's compute side).

    pip install transformers   # not a project dependency: this is a one-off measurement
    python bench/op_census.py > bench/op_census.json

Per-layer numbers come from the difference of a 2-layer and a 1-layer model; per-token numbers
from a least-squares fit over several widths: bytes/token/layer = a*d + b*f (+ c*h*s for eager).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

MATMUL_OPS = {"mm", "bmm", "addmm", "baddbmm", "matmul", "linear", "_addmm_activation"}
ATTENTION_PREFIX = ("_scaled_dot_product", "scaled_dot_product", "_flash_attention", "_efficient_attention")
FREE_OPS = {"detach", "lift_fresh", "_to_copy_noop", "empty", "empty_like", "empty_strided", "zeros_like_noop"}


def _bytes(tensors: Any) -> int:
    flat, _ = tree_flatten(tensors)
    return sum(t.numel() * t.element_size() for t in flat if isinstance(t, torch.Tensor))


class Census(TorchDispatchMode):
    """Counts kernels and bytes per op class while active."""

    def __init__(self) -> None:
        super().__init__()
        self.kernels: Counter[str] = Counter()
        self.bytes: Counter[str] = Counter()
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if func.is_view or name in FREE_OPS:
            return out
        if name in MATMUL_OPS:
            kind = "matmul"
        elif name.startswith(ATTENTION_PREFIX):
            kind = "attention"
        else:
            kind = "other"
        self.kernels[kind] += 1
        self.ops[name] += 1
        if kind == "other":
            self.bytes[kind] += _bytes((args, kwargs)) + _bytes(out)
        return out


def census(
    d: int, f: int, heads: int, layers: int, seq: int, batch: int, vocab: int, attn: str, ckpt: bool,
    precision: str = "bf16", lora_r: int = 0,
) -> dict[str, Any]:
    import contextlib

    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        hidden_size=d, intermediate_size=f, num_attention_heads=heads, num_key_value_heads=heads,
        num_hidden_layers=layers, vocab_size=vocab, max_position_embeddings=seq, attn_implementation=attn,
    )
    model = LlamaForCausalLM(cfg)
    if precision == "bf16":
        model = model.to(torch.bfloat16)
    if lora_r:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=lora_r, lora_alpha=16, lora_dropout=0.05))  # PEFT default targets: q_proj, v_proj
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if precision == "amp_bf16" else contextlib.nullcontext()
    if ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    ids = torch.randint(0, vocab, (batch, seq))
    with autocast:
        loss = model(input_ids=ids, labels=ids).loss  # warm-up: lazy init happens outside the census
    loss.backward()
    model.zero_grad(set_to_none=True)
    with Census() as c:
        with autocast:
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
    return {"kernels": dict(c.kernels), "bytes": dict(c.bytes), "ops": dict(c.ops)}


def per_layer(
    d: int, f: int, heads: int, seq: int, batch: int, vocab: int, attn: str, ckpt: bool = False,
    precision: str = "bf16", lora_r: int = 0,
) -> dict[str, Any]:
    one = census(d, f, heads, 1, seq, batch, vocab, attn, ckpt, precision, lora_r)
    two = census(d, f, heads, 2, seq, batch, vocab, attn, ckpt, precision, lora_r)
    tokens = seq * batch
    layer_kernels = {k: two["kernels"].get(k, 0) - one["kernels"].get(k, 0) for k in set(two["kernels"]) | set(one["kernels"])}
    layer_bytes = two["bytes"].get("other", 0) - one["bytes"].get("other", 0)
    rest_kernels = {k: one["kernels"].get(k, 0) - layer_kernels.get(k, 0) for k in one["kernels"]}
    rest_bytes = one["bytes"].get("other", 0) - layer_bytes
    layer_ops = {k: two["ops"].get(k, 0) - one["ops"].get(k, 0) for k in two["ops"]}
    return {
        "d": d, "f": f, "heads": heads, "seq": seq, "batch": batch, "vocab": vocab, "attn": attn, "ckpt": ckpt,
        "precision": precision, "lora_r": lora_r,
        "layer_kernels": layer_kernels,
        "layer_nonmatmul_bytes_per_token": layer_bytes / tokens,
        "outside_layers_kernels": rest_kernels,
        "outside_layers_nonmatmul_bytes_per_token": rest_bytes / tokens,
        "layer_ops": {k: v for k, v in sorted(layer_ops.items()) if v},
    }


def host_seconds_per_kernel(layers: int = 8, repeats: int = 50) -> dict[str, float]:
    """Wall time of a tiny Hugging Face Llama training step (hidden 32, 4 tokens) on one CPU
    thread divided by the kernels it launches: the host's cost to dispatch one eager op."""
    import time

    from transformers import LlamaConfig, LlamaForCausalLM

    torch.set_num_threads(1)
    cfg = LlamaConfig(
        hidden_size=32, intermediate_size=64, num_attention_heads=2, num_key_value_heads=2,
        num_hidden_layers=layers, vocab_size=64, attn_implementation="sdpa",
    )
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.train()
    ids = torch.randint(0, 64, (1, 4))
    for _ in range(5):
        model(input_ids=ids, labels=ids).loss.backward()
    with Census() as c:
        model(input_ids=ids, labels=ids).loss.backward()
    kernels = sum(c.kernels.values())
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        model(input_ids=ids, labels=ids).loss.backward()
        times.append(time.perf_counter() - start)
    median = float(np.median(times))
    return {"layers": layers, "kernels": kernels, "median_step_s": median, "seconds_per_kernel": median / kernels}


def main() -> None:
    shapes = [(64, 172, 4), (128, 344, 4), (256, 688, 8), (128, 512, 4), (256, 384, 8)]
    vocab = 1000
    seq, batch = 64, 2
    results = []
    variants = [
        ("sdpa", False, "bf16", 0), ("eager", False, "bf16", 0), ("sdpa", True, "bf16", 0),
        ("sdpa", False, "fp32", 0), ("sdpa", False, "amp_bf16", 0), ("sdpa", False, "bf16", 8),
    ]
    for attn, ckpt, precision, lora_r in variants:
        for d, f, h in shapes:
            results.append(per_layer(d, f, h, seq, batch, vocab, attn, ckpt, precision, lora_r))
            print(
                f"{attn} ckpt={ckpt} {precision} lora={lora_r} d={d} f={f}: "
                f"{results[-1]['layer_nonmatmul_bytes_per_token']:.0f} B/token/layer",
                file=sys.stderr,
            )
    fits: dict[str, Any] = {}
    for attn, ckpt, precision, lora_r in variants:
        key = f"{attn}{'-ckpt' if ckpt else ''}-{precision}{f'-lora{lora_r}' if lora_r else ''}"
        rows = [r for r in results if (r["attn"], r["ckpt"], r["precision"], r["lora_r"]) == (attn, ckpt, precision, lora_r)]
        A = np.array([[r["d"], r["f"]] for r in rows], dtype=float)
        y = np.array([r["layer_nonmatmul_bytes_per_token"] for r in rows])
        if attn == "eager":  # scores: heads x seq elements per token
            A = np.column_stack([A, [r["heads"] * r["seq"] for r in rows]])
        coef, *_ = np.linalg.lstsq(A, y, rcond=None)
        fitted = A @ coef
        fits[key] = {
            "coefficients": dict(zip(["per_d", "per_f", "per_head_seq"], [float(c) for c in coef], strict=True)),
            "max_rel_residual": float(np.max(np.abs(fitted - y) / y)),
            "layer_kernels": rows[0]["layer_kernels"],
        }
    # outside the layers: embedding, final norm, LM head and cross-entropy, per token per vocab entry
    for precision in ("bf16", "fp32", "amp_bf16"):
        rows = [r for r in results if (r["attn"], r["ckpt"], r["precision"], r["lora_r"]) == ("sdpa", False, precision, 0)]
        fits[f"outside_layers_bytes_per_token_per_vocab-{precision}"] = float(
            np.median([r["outside_layers_nonmatmul_bytes_per_token"] / vocab for r in rows])
        )
        fits[f"outside_layers_kernels-{precision}"] = rows[0]["outside_layers_kernels"]
    timing = host_seconds_per_kernel()
    print(f"host: {timing['seconds_per_kernel'] * 1e6:.1f} us per kernel", file=sys.stderr)
    print(json.dumps({"torch": torch.__version__, "fits": fits, "host_timing": timing, "runs": results}, indent=1))


if __name__ == "__main__":
    main()
