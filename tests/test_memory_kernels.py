"""What eager PyTorch keeps for backward, kernel by kernel: hand-worked byte counts from PyTorch's
autograd definitions (tools/autograd/derivatives.yaml, cited per test) and the modules' source,
checked against what torch.autograd.graph.saved_tensors_hooks sees on real CPU tensors, and
against the analytic model's trace (perfmodel.analytic.activations)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaMLP, LlamaRMSNorm

from perfmodel.analytic import activations as act
from perfmodel.config import load_workload

B, S, D, H, FFN, V = 2, 16, 64, 4, 160, 500
N = B * S  # tokens
BF16, FP32 = 2, 4


def kept_bytes(fn, *tensors: torch.Tensor) -> int:
    """Bytes of the distinct storages autograd keeps for backward while running fn(*tensors),
    parameters (of fn when it is a module) and the inputs themselves excluded."""
    params = list(fn.parameters()) if isinstance(fn, torch.nn.Module) else []
    exclude = {t.untyped_storage().data_ptr() for t in (*tensors, *params)}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        st = t.untyped_storage()
        if st.data_ptr() not in exclude and not isinstance(t, torch.nn.Parameter):
            seen[st.data_ptr()] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*tensors)
    return sum(seen.values())


def _x(width: int = D, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    return torch.randn(B, S, width, dtype=dtype, requires_grad=True)


def _params(module: torch.nn.Module, dtype: torch.dtype, train: bool) -> torch.nn.Module:
    module = module.to(dtype)
    for p in module.parameters():
        p.requires_grad_(train)
    return module


def test_hf_rmsnorm_keeps_its_fp32_upcast_the_rstd_and_the_normalised_copy():
    """LlamaRMSNorm: x.to(float32) -> pow (derivatives.yaml pow.Tensor_Scalar: self) keeps the fp32
    upcast; rsqrt (result) keeps one fp32 per row; mul(weight, normed.to(bf16)) keeps the bf16
    normalised copy for the weight's gradient (mul.Tensor: other), none when the weight is frozen."""
    trained = _params(LlamaRMSNorm(D), torch.bfloat16, True)
    frozen = _params(LlamaRMSNorm(D), torch.bfloat16, False)
    assert kept_bytes(trained, _x()) == FP32 * D * N + FP32 * N + BF16 * D * N
    assert kept_bytes(frozen, _x()) == FP32 * D * N + FP32 * N


def test_torch_rmsnorm_keeps_the_fp32_upcast_and_the_fp32_product():
    """torch.nn.RMSNorm (aten rms_norm composite, layer_norm.cpp): upcast (kept by pow), rsqrt
    (result), upcast * rstd (kept for the weight's gradient, in fp32), then type_as(input)."""
    trained = _params(torch.nn.RMSNorm(D), torch.bfloat16, True)
    assert kept_bytes(trained, _x()) == FP32 * D * N + FP32 * N + FP32 * D * N


def test_a_linear_keeps_its_input_only_for_its_weights_gradient():
    """mm (derivatives.yaml mm: self for mat2's gradient, mat2 for self's): a trainable linear
    keeps its input; a frozen one keeps nothing but its weight."""
    trained = _params(torch.nn.Linear(D, D, bias=False), torch.bfloat16, True)
    frozen = _params(torch.nn.Linear(D, D, bias=False), torch.bfloat16, False)
    weights = [trained.weight, frozen.weight]
    # x * 1: a fresh input (a scalar multiply keeps nothing) that is not excluded as an input
    assert kept_bytes(lambda x, *_: trained(x * 1), _x(), *weights) == BF16 * D * N
    assert kept_bytes(lambda x, *_: frozen(x * 1), _x(), *weights) == 0


def test_swiglu_keeps_gate_silu_up_and_the_product_for_the_down_projection():
    """LlamaMLP: silu keeps self (the gate projection), mul keeps silu(gate) and up, the trainable
    down projection keeps its input (the product): 4 f-wide bf16 tensors; frozen: 3."""
    config = LlamaConfig(hidden_size=D, intermediate_size=FFN)
    trained = _params(LlamaMLP(config), torch.bfloat16, True)
    frozen = _params(LlamaMLP(config), torch.bfloat16, False)
    x = _x()
    # the trainable gate/up projections also keep x itself, which kept_bytes excludes (an input)
    assert kept_bytes(trained, x) == 4 * BF16 * FFN * N
    assert kept_bytes(frozen, x) == 3 * BF16 * FFN * N


def test_flash_sdpa_keeps_query_key_value_output_and_an_fp32_logsumexp():
    """_scaled_dot_product_flash_attention (derivatives.yaml: query, key, value, output,
    logsumexp): the inputs are excluded here; what is new is the output and one fp32 per head
    and token."""
    q, k, v = (torch.randn(B, H, S, D // H, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))

    def attend(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    assert kept_bytes(attend, q, k, v) == BF16 * D * N + FP32 * H * N


def test_dropout_keeps_a_one_byte_mask():
    """native_dropout (derivatives.yaml: result1, the mask): one bool per element (what CUDA's
    F.dropout runs; the CPU's composite keeps a noise tensor instead)."""
    x = _x()
    assert kept_bytes(lambda t: torch.native_dropout(t, 0.1, True)[0], x) == 1 * D * N


def test_the_loss_keeps_fp32_log_probabilities_and_the_targets():
    """F.cross_entropy(logits.float()): _to_copy keeps nothing, _log_softmax keeps its fp32 result
    (derivatives.yaml: result), nll_loss keeps self (the same tensor) and the int64 target."""
    logits = torch.randn(N, V, dtype=torch.bfloat16, requires_grad=True)
    target = torch.randint(0, V, (N,))
    # and nll_loss's fp32 total_weight scalar
    assert kept_bytes(lambda t, y: F.cross_entropy(t.float(), y), logits, target) == FP32 * V * N + FP32


def test_layer_norm_keeps_input_mean_and_rstd():
    """native_layer_norm (derivatives.yaml: input, mean, rstd, weight, bias); its input excluded."""
    ln = _params(torch.nn.LayerNorm(D), torch.float32, True)
    assert kept_bytes(ln, _x(dtype=torch.float32)) == 2 * FP32 * N


def test_autocast_keeps_a_16_bit_copy_of_the_input_and_of_the_weight():
    """Under autocast a linear casts its fp32 input and weight to bf16 and keeps both copies."""
    lin = _params(torch.nn.Linear(D, D, bias=False), torch.float32, True)
    x = _x(dtype=torch.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert kept_bytes(lin, x) == BF16 * D * N + BF16 * D * D


def _workload(**training):
    model = {"name": "tiny", "arch": "decoder", "hidden_size": D, "num_layers": 2, "num_heads": H, "num_kv_heads": H,
             "ffn_hidden_size": FFN, "vocab_size": V, "gated_mlp": True}  # fmt: skip
    return load_workload({"model": model, "training": {"seq_len": S, "micro_batch_size": B, "tokens": 1e6, **training},
                          "hardware": {"gpu": "H200"}})  # fmt: skip


def _hf_layer_kept(precision: str, lora: bool) -> int:
    """What one transformers LlamaDecoderLayer keeps, measured: the oracle's built model, its
    second layer (its input needs a gradient), run for real on CPU tensors."""
    from perfmodel.measure import memory_oracle as mo

    w = _workload(precision=precision, **({"lora_r": 8, "lora_target_modules": 2} if lora else {}))
    built = mo._build(w)
    layer = built.layers[1]
    dtype = torch.float32 if precision != "bf16" else torch.bfloat16
    x = torch.randn(B, S, D, dtype=dtype, requires_grad=True)
    rotary = built.body.rotary_emb
    cos_sin = rotary(x, torch.arange(S).unsqueeze(0))
    ctx = torch.autocast("cpu", dtype=torch.bfloat16) if precision == "amp_bf16" else torch.autocast("cpu", enabled=False)
    weights = {p.untyped_storage().data_ptr() for p in built.model.parameters()}
    exclude = {x.untyped_storage().data_ptr(), *(t.untyped_storage().data_ptr() for t in cos_sin)} | weights
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        st = t.untyped_storage()
        if st.data_ptr() not in exclude:
            seen[st.data_ptr()] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), ctx:
        layer(x, attention_mask=None, position_embeddings=cos_sin)
    # under autocast the 16-bit weight copies are counted apart (once per model)
    copies = 2 * sum(m.weight.numel() for m in layer.modules() if isinstance(m, torch.nn.Linear) and m.weight.dtype == torch.float32)
    return sum(seen.values()) - (copies if precision == "amp_bf16" else 0)


def test_the_analytic_trace_keeps_what_a_transformers_llama_layer_keeps():
    """The whole layer: the analytic model's trace (input's storage excluded, as measured) against
    the tensors a real LlamaDecoderLayer keeps, in bf16, fp32 and under autocast, full and LoRA."""
    for precision in ("bf16", "fp32", "amp_bf16"):
        for lora in (False, True):
            w = _workload(precision=precision, **({"lora_r": 8, "lora_target_modules": 2} if lora else {}))
            layer = act.layer(w)
            res = 2 if precision == "bf16" else 4
            analytic = layer.bytes_per_token * N
            if precision != "bf16":  # the fp32 residual is the layer input itself (pow keeps it), excluded
                analytic -= res * D * N
            assert _hf_layer_kept(precision, lora) == analytic, (precision, lora, layer.by_kernel())


# --- ResNet (perfmodel.measure.models, torchvision's layers) ------------------------------------


def _block_kept(block: torch.nn.Module, x: torch.Tensor) -> int:
    """kept_bytes of a ResNet block, its BatchNorm running statistics (buffers) excluded too."""
    buffers = {b.untyped_storage().data_ptr() for b in block.buffers()}
    seen: dict[int, int] = {}
    exclude = {x.untyped_storage().data_ptr(), *buffers, *(p.untyped_storage().data_ptr() for p in block.parameters())}

    def pack(t: torch.Tensor) -> torch.Tensor:
        st = t.untyped_storage()
        if st.data_ptr() not in exclude:
            seen[st.data_ptr()] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        block(x)
    return sum(seen.values())


def test_a_resnet_basic_block_keeps_two_batchnorm_inputs_and_two_relu_results():
    """A basic block y = relu(bn2(conv2(relu(bn1(conv1(x))))) + x), fp32, batch 2, 8 channels,
    8x8, stride 1 (identity shortcut). derivatives.yaml: convolution keeps `input` and `weight`
    (conv1's input is x, not counted; conv2's is relu1's result); native_batch_norm keeps `input`
    (the conv output), the weight, the running statistics (buffers) and fp32 save_mean /
    save_invstd (one per channel each); relu (threshold_backward) keeps `result`; add keeps
    nothing. New tensors kept: conv1 output, relu1 result, conv2 output, the block's relu result:
    4 x (2 x 8 x 8 x 8) x 4 bytes = 16384, plus 2 BatchNorms x 2 x 8 channels x 4 bytes = 128."""
    from perfmodel.measure.models import BasicBlock

    block = BasicBlock(8, 8, 1).train()
    x = torch.randn(2, 8, 8, 8, requires_grad=True)
    activations = 4 * (2 * 8 * 8 * 8) * FP32
    stats = 2 * 2 * 8 * FP32
    assert _block_kept(block, x) == activations + stats == 16384 + 128
    # with a strided 1x1-conv shortcut (8 -> 16 channels, stride 2, 4x4 out): its BatchNorm's input too
    down = BasicBlock(8, 16, 2).train()
    assert _block_kept(down, x) == 5 * (2 * 16 * 4 * 4) * FP32 + 3 * 2 * 16 * FP32
    # the analytic model: ResNet-18's first block (64 channels, 56x56) and stage 2's first (64 -> 128,
    # stride 2, 28x28), per sample, the per-channel statistics left out (per BatchNorm, not per sample)
    layout = act.ResNetLayout(stages=(2, 2, 2, 2), bottleneck=False)
    for precision, e in (("fp32", FP32), ("tf32", FP32), ("bf16", BF16), ("amp_bf16", BF16)):
        blocks = act.convnet(layout, precision).blocks
        assert blocks[0].saved == 4 * 64 * 56 * 56 * e
        assert blocks[2].saved == 5 * 128 * 28 * 28 * e


def test_max_pool_keeps_int64_indices_and_global_average_pooling_keeps_nothing():
    """max_pool2d_with_indices keeps `self` and `indices` (int64: 8 bytes per output element,
    whatever the input's dtype); adaptive_avg_pool2d to 1x1 runs mean (ATen
    AdaptiveAveragePooling.cpp), which keeps only sizes."""
    x = torch.randn(2, 4, 8, 8, dtype=torch.bfloat16, requires_grad=True)
    assert kept_bytes(lambda t: F.max_pool2d(t, 3, 2, 1), x) == 2 * 4 * 4 * 4 * 8
    assert kept_bytes(lambda t: F.adaptive_avg_pool2d(t, 1), x) == 0
    stem = act.convnet(act.ResNetLayout(stages=(2, 2, 2, 2), bottleneck=False), "bf16").stem
    assert stem["max-pool indices"] == 64 * 56 * 56 * 8
