"""Kernel works: the constructors count what the modules dispatch (against the census that measured
them) and what an ideal kernel moves (worked by hand); bad input is refused naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfmodel.kernels import work as W
from perfmodel.kernels.census import EAGER_CENSUS, OPTIMIZER_CENSUS

CENSUS_JSON = Path(__file__).resolve().parents[1] / "bench" / "kernel_census.json"


def test_eager_constants_are_the_census_measurement() -> None:
    measured = json.loads(CENSUS_JSON.read_text())
    for (kind, variant, cls), phases in EAGER_CENSUS.items():
        entry = measured["modules"][f"{kind}/{variant}/{'fp32' if cls == 'fp32' else 'bf16'}"]
        for phase, (launches, a, b, c) in phases.items():
            got = entry[phase]
            terms = [v for k, v in got.items() if k.startswith("bytes_per") and k != "bytes_per_element"]
            assert launches == got["launches"], (kind, variant, cls, phase)
            for mine, theirs in zip((a, b, c), (got["bytes_per_element"], *terms), strict=True):
                assert mine == pytest.approx(theirs, abs=0.06), (kind, variant, cls, phase)
    for name, census in OPTIMIZER_CENSUS.items():
        got = measured["optimizers"][f"{name}/fp32"]
        if census.launches_per_tensor:
            assert census.launches_per_tensor == got["launches_per_tensor"]
        elif name != "adamw-fused":  # fused: depth 4 from the CUDA kernel, not the census's 5 lists
            assert list(census.foreach_depths) == got["foreach_depths"]
        if name != "adamw-fused":  # fused: 28 B (3 writes), not the census's 32 (grads marked written)
            assert census.bytes_per_param_fp32 == got["bytes_per_param"]


def test_matmul_by_hand() -> None:
    # nn.Linear(1280, 3840) on 4096 tokens in fp32 (GPT-2 large's c_attn): 2 * 4096 * 3840 * 1280 FLOPs
    fwd = W.matmul_work(4096, 3840, 1280, "fp32")
    assert fwd.flops == 2 * 4096 * 3840 * 1280
    assert fwd.bytes == 4 * (4096 * 1280 + 1280 * 3840 + 4096 * 3840)
    full = W.matmul_work(4096, 3840, 1280, "fp32", phase="full")
    assert full.flops == 3 * fwd.flops and full.launches == 3
    lora = W.matmul_work(4096, 3840, 1280, "bf16", phase="backward", variant="gemm-dgrad")
    assert lora.flops == fwd.flops and lora.launches == 1


def test_eager_rmsnorm_moves_the_census_bytes() -> None:
    # LlamaRMSNorm in bf16 forward: 8 kernels, 36 bytes per element + 2 per col + 24 per row
    w = W.norm_work(2048, 4096, "bf16", variant="rms", phase="forward")
    assert w.launches == 8
    assert w.bytes_moved == pytest.approx(36 * 2048 * 4096 + 2 * 4096 + 24 * 2048)
    assert w.bytes == pytest.approx(2 * 2048 * 4096 * 2 + 4096 * 2 + 2048 * 4)
    fused = W.norm_work(2048, 4096, "bf16", variant="rms", impl="fused", phase="full")
    assert fused.bytes_moved == fused.bytes and fused.launches == 3


def test_math_attention_moves_what_cuda_dispatches_by_hand() -> None:
    # Hugging Face eager attention, causal, bf16, batch 2, 3 heads, 128 tokens, head_dim 64.
    # Forward per score: QK^T writes 2, PV reads 2 (the GEMMs'); scale 2+2; mask add 2+2; cast to fp32
    # 2+4; softmax 4+4; cast back 4+2 = 32 bytes; plus q, k, v read and o written (4 x 2 x 3 x 128 x 64
    # x 2 bytes) and the fp32 log-sum-exp row (2 x 3 x 128 x 4): 2 GEMMs + 5 elementwise kernels
    scores = 2 * 3 * 128 * 128
    fwd = W.attention_work(2, 3, 128, 128, 64, "bf16", causal=True, variant="math", phase="forward")
    assert fwd.bytes_moved == 32 * scores + 4 * 2 * 3 * 128 * 64 * 2 + 2 * 3 * 128 * 4
    assert fwd.launches == 7
    assert fwd.flops == 4 * scores * 64  # every score is computed; the mask is applied after QK^T
    # backward, no mask (timm's ViT): dP written, P and dS read (4 x 2); the cast back's gradient 2+4,
    # softmax backward 4+4+4, the cast's gradient 4+2, the scale's 2+2 = 36 bytes per score; q, k, v, o,
    # dO read and dq, dk, dv written (2 x 4 x 2 x 3 x 128 x 64 x 2) and the log-sum-exp: 4 GEMMs + 4 kernels
    bwd = W.attention_work(2, 3, 128, 128, 64, "bf16", causal=False, variant="math", phase="backward")
    assert bwd.bytes_moved == 36 * scores + 2 * 4 * 2 * 3 * 128 * 64 * 2 + 2 * 3 * 128 * 4
    assert bwd.launches == 8
    assert W.math_elementwise_bytes(bwd) == 28 * scores  # what streams beyond the GEMMs' own bytes


def test_math_attention_with_a_native_softmax_and_dropout_moves_the_kernels_it_runs() -> None:
    # fxmarty/efficient-attention-benchmark@3335822 benchmark_training.py: softmax(q @ k^T / sqrt(d))
    # on fp16 scores (no cast), dropout p=0.1, @ v. Forward per score: QK^T writes 2, PV reads 2; the
    # division 2+2; softmax 2+2; native_dropout reads 2, writes 2 and a 1-byte mask = 17 bytes, 2 GEMMs
    # + 3 kernels. Backward: dP written, P and dS read (4 x 2); dropout's backward 2+1+2; softmax's
    # 2+2+2; the division's 2+2 = 23 bytes, 4 GEMMs + 3 kernels. q, k, v, o (and the log-sum-exp row)
    # as for every attention.
    scores = 2 * 3 * 128 * 128
    flags = W.SCORES_NATIVE_SOFTMAX | W.SCORES_DROPOUT
    qkv_o = 4 * 2 * 3 * 128 * 64 * 2
    fwd = W.attention_work(
        2, 3, 128, 128, 64, "fp16", causal=False, variant="math", phase="forward", scores=flags
    )
    assert fwd.bytes_moved == 17 * scores + qkv_o + 2 * 3 * 128 * 4
    assert fwd.launches == 5
    bwd = W.attention_work(
        2, 3, 128, 128, 64, "fp16", causal=False, variant="math", phase="backward", scores=flags
    )
    assert bwd.bytes_moved == 23 * scores + 2 * qkv_o + 2 * 3 * 128 * 4
    assert bwd.launches == 7
    assert W.math_elementwise_bytes(bwd) == 15 * scores
    assert fwd.shape[-1] == flags  # the kernel table reads the flags back from the shape
    # fp32 has no casts to drop: the native softmax moves what the default path does
    plain = W.attention_work(2, 3, 128, 128, 64, "fp32", causal=False, variant="math", phase="full")
    native = W.attention_work(
        2, 3, 128, 128, 64, "fp32", causal=False, variant="math", phase="full", scores=1
    )
    assert native.bytes_moved == plain.bytes_moved and native.launches == plain.launches
    with pytest.raises(ValueError, match="scores flags"):
        W.attention_work(2, 3, 128, 128, 64, "fp16", causal=False, variant="math", scores=8)
    # fused (a compiler's one kernel per phase, the causal mask add and the dropout inside): forward
    # reads 2, writes 2 and the 1-byte mask; backward reads the gradient 2, the probabilities 2 and the
    # mask 1, writes 2; one kernel each beside the GEMMs
    fused = W.SCORES_FUSED | W.SCORES_DROPOUT
    fwd = W.attention_work(
        2, 3, 128, 128, 64, "fp16", causal=True, variant="math", phase="forward", scores=fused
    )
    assert fwd.bytes_moved == (4 + 5) * scores + qkv_o + 2 * 3 * 128 * 4 and fwd.launches == 3
    bwd = W.attention_work(
        2, 3, 128, 128, 64, "fp16", causal=True, variant="math", phase="backward", scores=fused
    )
    assert bwd.bytes_moved == (8 + 7) * scores + 2 * qkv_o + 2 * 3 * 128 * 4 and bwd.launches == 5


def test_every_constructor_keeps_moved_at_least_ideal() -> None:
    works = [
        W.norm_work(512, 768, d, variant=v, impl=i, phase=p)
        for d in ("fp32", "bf16")
        for v in ("rms", "rms-torch", "layer", "batch")
        for i in ("eager", "fused", "compiled")
        for p in ("forward", "backward", "full")
    ]
    works += [W.activation_work(512, 3072, "bf16", variant=v, phase="full") for v in W.VARIANTS["activation"]]
    works += [
        W.rotary_work(1024, 32, 8, 128, "bf16", phase="full"),
        W.loss_work(1024, 32000, "bf16", phase="full"),
    ]
    works += [W.embedding_work(1024, 32000, 4096, "fp32", phase="full")]
    works += [W.optimizer_work(1e8, 100, "fp32", variant=v) for v in W.VARIANTS["optimizer"]]
    works += [
        W.attention_work(2, 16, 512, 512, 64, "bf16", causal=True, variant=v, phase="full")
        for v in W.VARIANTS["attention"]
    ]
    works += [W.dequant_work(1e7, 4, "bf16"), W.conv_work(8, 64, 64, 56, 56, 3, "bf16", phase="full")]
    works += [
        W.elementwise_work(1 << 20, "bf16", variant=v, phase="full", source_dtype="fp32")
        for v in W.VARIANTS["elementwise"]
    ]
    for w in works:
        assert w.bytes_moved >= w.bytes > 0 and w.launches >= 1, w


def test_multi_tensor_launches_follow_the_cuda_chunking() -> None:
    # AdamW foreach over 291 tensors (a 7B Llama): each of the 8 ops launches at least ceil(291 / depth-limit)
    w = W.optimizer_work(6.7e9, 291, "fp32", variant="adamw-foreach")
    by_tensors = sum(-(-291 // W.MTA_MAX_TENSORS[d]) for d in (1, 2, 1, 3, 2, 1, 1, 3))
    by_blocks = 8 * -(-(6.7e9 / 65536 + 291) // 320)
    assert w.launches >= max(by_tensors, by_blocks) - 8
    assert W.optimizer_work(6.7e9, 291, "fp32", variant="adamw-forloop").launches == 8 * 291


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: W.norm_work(0, 4096, "bf16"), "rows must be a number >= 1"),
        (lambda: W.norm_work(16, 4096, "bf17"), "dtype must be one of"),
        (lambda: W.norm_work(16, 4096, "bf16", variant="group"), "norm variant must be one of"),
        (lambda: W.matmul_work(16, 16, 16, "bf16", phase="both"), "phase must be one of"),
        (lambda: W.activation_work(16, 16, "fp8"), "not modelled"),
        (lambda: W.dequant_work(100, 3, "bf16"), "bits must be 4 or 8"),
    ],
)
def test_bad_input_names_the_field(call, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message):
        call()
