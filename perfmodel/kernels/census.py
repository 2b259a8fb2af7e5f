"""What the eager implementations dispatch: kernels launched and bytes moved per kernel call, as
counted by `bench/kernel_census.py` (results in bench/kernel_census.json; torch 2.13, transformers
5.24, CPU). `tests/test_kernels_work.py` checks these numbers against that file.

Method: every ATen op of the real module's forward, and of its backward driven by a dense upstream
gradient, intercepted with a TorchDispatchMode; views and host-side scalar ops are free; per op,
bytes = its tensor inputs + outputs (in-place arguments read and written), each over the memory it
spans; gathers (nll_loss, embedding) read only the rows they gather; nll_loss_backward takes its
input for the shape only (the CUDA kernel zero-fills and scatters the gradient). Which ATen ops a module
dispatches does not depend on the device, except where noted in `perfmodel/kernels/work.py`
(torch.nn.RMSNorm, dropout and the optimizers' multi-tensor launches differ on CUDA).

Each entry: (kind, variant, dtype class) -> phase -> (launches, a, b, c) with
bytes_moved = a * elements + b * (second term) + c * (third term), the terms per kind:
  norm, activation, elementwise, loss: elements = rows * cols, b per col, c per row
  rotary: elements = q + k elements, b per cos/sin table element (tokens * head_dim), c per token
  embedding: elements = tokens * dim, b per col (for a vocabulary of 512: work.py rescales it to
             the real vocabulary as bytes per vocab * dim element), c per token
  attention math: elements = scores (batch * heads * s_q * s_kv), b per q/k/v element, c per mask element
dtype class 'fp32' = fp32/tf32 tensors, 'half' = bf16/fp16 tensors (the module cast to that dtype).
"""

from __future__ import annotations

from typing import NamedTuple

CENSUS_VOCAB = 512
"""Vocabulary of the embedding the census ran (its per-col backward term is 4 bytes x 512)."""

# fmt: off
EAGER_CENSUS: dict[tuple[str, str, str], dict[str, tuple[int, float, float, float]]] = {
    # Hugging Face LlamaRMSNorm: to(fp32), pow, mean, add, rsqrt, mul, to(dtype), weight mul
    ("norm", "rms", "fp32"): {"forward": (6, 28.0, 4.0, 24.0), "backward": (14, 92.0, 8.0, 40.0)},
    ("norm", "rms", "half"): {"forward": (8, 36.0, 2.0, 24.0), "backward": (16, 92.0, 4.0, 40.0)},
    # torch.nn.LayerNorm: native_layer_norm / native_layer_norm_backward
    ("norm", "layer", "fp32"): {"forward": (1, 8.0, 8.0, 8.0), "backward": (1, 12.0, 16.0, 8.0)},
    ("norm", "layer", "half"): {"forward": (1, 4.0, 4.0, 4.0), "backward": (1, 6.0, 8.0, 4.0)},
    # torch.nn.BatchNorm2d (training): native_batch_norm / native_batch_norm_backward
    ("norm", "batch", "fp32"): {"forward": (1, 8.0, 24.0, 0.0), "backward": (1, 12.0, 28.0, 0.0)},
    ("norm", "batch", "half"): {"forward": (1, 4.0, 12.0, 0.0), "backward": (1, 6.0, 14.0, 0.0)},
    # LlamaMLP's act_fn(gate) * up: silu, mul (backward: mul x 2, silu_backward); cols = MLP width
    ("activation", "swiglu", "fp32"): {"forward": (2, 20.0, 0.0, 0.0), "backward": (3, 36.0, 0.0, 0.0)},
    ("activation", "swiglu", "half"): {"forward": (2, 10.0, 0.0, 0.0), "backward": (3, 18.0, 0.0, 0.0)},
    # gelu(gate, approximate="tanh") * up (GeGLU, Gemma's gelu_pytorch_tanh)
    ("activation", "geglu", "fp32"): {"forward": (2, 20.0, 0.0, 0.0), "backward": (3, 36.0, 0.0, 0.0)},
    ("activation", "geglu", "half"): {"forward": (2, 10.0, 0.0, 0.0), "backward": (3, 18.0, 0.0, 0.0)},
    # F.gelu (BERT's GELUActivation)
    ("activation", "gelu", "fp32"): {"forward": (1, 8.0, 0.0, 0.0), "backward": (1, 12.0, 0.0, 0.0)},
    ("activation", "gelu", "half"): {"forward": (1, 4.0, 0.0, 0.0), "backward": (1, 6.0, 0.0, 0.0)},
    # Hugging Face NewGELUActivation (GPT-2): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), op by op
    ("activation", "gelu-new", "fp32"): {"forward": (8, 72.0, 0.0, 0.0), "backward": (11, 112.0, 0.0, 0.0)},
    ("activation", "gelu-new", "half"): {"forward": (8, 36.0, 0.0, 0.0), "backward": (11, 56.0, 0.0, 0.0)},
    ("activation", "relu", "fp32"): {"forward": (1, 8.0, 0.0, 0.0), "backward": (1, 12.0, 0.0, 0.0)},
    ("activation", "relu", "half"): {"forward": (1, 4.0, 0.0, 0.0), "backward": (1, 6.0, 0.0, 0.0)},
    ("activation", "silu", "fp32"): {"forward": (1, 8.0, 0.0, 0.0), "backward": (1, 12.0, 0.0, 0.0)},
    ("activation", "silu", "half"): {"forward": (1, 4.0, 0.0, 0.0), "backward": (1, 6.0, 0.0, 0.0)},
    # Hugging Face apply_rotary_pos_emb(q, k, cos, sin): q*cos + rotate_half(q)*sin (neg, cat), for q and k
    ("rotary", "rope", "fp32"): {"forward": (10, 40.0, 16.0, 0.0), "backward": (14, 56.0, 16.0, 0.0)},
    ("rotary", "rope", "half"): {"forward": (10, 20.0, 8.0, 0.0), "backward": (14, 28.0, 8.0, 0.0)},
    # x + y (the backward passes the gradient through: its accumulation at the fork is in work.py)
    ("elementwise", "add", "fp32"): {"forward": (1, 12.0, 0.0, 0.0), "backward": (0, 0.0, 0.0, 0.0)},
    ("elementwise", "add", "half"): {"forward": (1, 6.0, 0.0, 0.0), "backward": (0, 0.0, 0.0, 0.0)},
    # F.softmax(x, -1): _softmax / _softmax_backward_data
    ("elementwise", "softmax", "fp32"): {"forward": (1, 8.0, 0.0, 0.0), "backward": (1, 12.0, 0.0, 0.0)},
    ("elementwise", "softmax", "half"): {"forward": (1, 4.0, 0.0, 0.0), "backward": (1, 6.0, 0.0, 0.0)},
    # Hugging Face ForCausalLMLoss: logits.float(), label pad/shift, log_softmax, nll_loss; cols = vocabulary
    ("loss", "cross_entropy", "fp32"): {"forward": (3, 8.0, 0.0, 24.4), "backward": (2, 16.0, 0.0, 8.2)},
    ("loss", "cross_entropy", "half"): {"forward": (4, 14.0, 0.0, 24.4), "backward": (3, 22.0, 0.0, 8.2)},
    # torch.nn.Embedding: embedding (gather) / embedding_dense_backward (a dense vocab x dim gradient)
    ("embedding", "lookup", "fp32"): {"forward": (1, 8.0, 0.0, 8.0), "backward": (1, 4.0, 2048.0, 8.0)},
    ("embedding", "lookup", "half"): {"forward": (1, 4.0, 0.0, 8.0), "backward": (1, 2.0, 1024.0, 8.0)},
    # Hugging Face eager_attention_forward (causal additive mask, dropout 0): bmm, mul, add, fp32 softmax, cast, bmm
    ("attention", "math", "fp32"): {"forward": (8, 40.0, 32.0, 4.0), "backward": (8, 30.7, 60.6, 0.0)},
    ("attention", "math", "half"): {"forward": (10, 36.0, 16.0, 2.0), "backward": (10, 33.3, 30.3, 0.0)},
}
# fmt: on


class OptimizerCensus(NamedTuple):
    """What one torch.optim step dispatches (the second step; the first creates the state)."""

    bytes_per_param_fp32: float
    """HBM bytes per trainable parameter with fp32 state (half of it with bf16 state)."""
    ideal_bytes_per_param_fp32: float
    """What the step must move at least, per parameter with fp32 state: each tensor it reads and writes
    once (AdamW: read weight, gradient and both moments, write weight and moments: 7 x 4 B)."""
    launches_per_tensor: int = 0
    """For-loop implementations: kernels per parameter tensor."""
    foreach_depths: tuple[int, ...] = ()
    """Foreach / fused implementations: the tensor-list depth of each multi-tensor op."""
    fixed_launches: int = 0
    """Kernels launched once per step whatever the tensor count (on a GPU: over device scalars)."""


OPTIMIZER_CENSUS: dict[str, OptimizerCensus] = {
    # torch.optim.AdamW(foreach=False): per tensor mul_ (decay), lerp_, mul_, addcmul_, sqrt, div, add_, addcdiv_
    "adamw-forloop": OptimizerCensus(bytes_per_param_fp32=84.0, ideal_bytes_per_param_fp32=28.0, launches_per_tensor=8),
    # torch.optim.AdamW(foreach=True): 8 foreach ops; their tensor-list depths as multi_tensor_apply sees them
    "adamw-foreach": OptimizerCensus(bytes_per_param_fp32=84.0, ideal_bytes_per_param_fp32=28.0, foreach_depths=(1, 2, 1, 3, 2, 1, 1, 3)),
    # torch.optim.AdamW(fused=True): one _fused_adamw_ (params, grads, exp_avgs, exp_avg_sqs: depth 4);
    # reads 4 tensors and writes 3 (the census counts grads as written too: the schema allows unscaling)
    "adamw-fused": OptimizerCensus(bytes_per_param_fp32=28.0, ideal_bytes_per_param_fp32=28.0, foreach_depths=(4,)),
    # torch.optim.SGD(foreach=True), no momentum: one _foreach_add_(params, grads)
    "sgd-foreach": OptimizerCensus(bytes_per_param_fp32=12.0, ideal_bytes_per_param_fp32=12.0, foreach_depths=(2,)),
    # torch.optim.SGD(momentum=0.9, foreach=True): _foreach_mul_, _foreach_add_ (buffer), _foreach_add_ (params)
    "sgd-momentum-foreach": OptimizerCensus(bytes_per_param_fp32=32.0, ideal_bytes_per_param_fp32=20.0, foreach_depths=(1, 2, 2)),
    # torch.optim.SGD(momentum=0.9, foreach=False): per tensor mul_, add_, add_
    "sgd-momentum-forloop": OptimizerCensus(bytes_per_param_fp32=32.0, ideal_bytes_per_param_fp32=20.0, launches_per_tensor=3),
    # torch.nn.utils.clip_grad_norm_(params, max_norm, foreach=True) (the Trainer's max_grad_norm, Ludwig's
    # clipglobalnorm): _foreach_norm(grads) (a list in, a list of norms out), then _foreach_mul_(grads,
    # clamped coefficient): 3 x 4 B a parameter; between them stack + vector_norm over the per-tensor norms,
    # and on a GPU the coefficient's add, div and clamp on device scalars (torch/nn/utils/clip_grad.py; the
    # CPU census sees 2 of these 5: its 0-dim ops are host scalars)
    "clip-foreach": OptimizerCensus(bytes_per_param_fp32=12.0, ideal_bytes_per_param_fp32=12.0, foreach_depths=(2, 1), fixed_launches=5),
    # foreach=False: vector_norm and mul_ per tensor
    "clip-forloop": OptimizerCensus(bytes_per_param_fp32=12.0, ideal_bytes_per_param_fp32=12.0, launches_per_tensor=2, fixed_launches=5),
    # torch.amp.GradScaler with fp16 autocast, each step (torch/amp/grad_scaler.py): unscale_ runs one
    # _amp_foreach_non_finite_check_and_unscale_ over the fp32 gradients (read + write, a multi-tensor
    # op); around it scale()'s loss multiply, the inverse scale's double / reciprocal / float, found_inf's
    # fill and update()'s _amp_update_scale_ on device scalars (step() reads found_inf back: a sync)
    "amp-unscale": OptimizerCensus(bytes_per_param_fp32=8.0, ideal_bytes_per_param_fp32=8.0, foreach_depths=(1,), fixed_launches=6),
}
"""torch.optim step census per implementation."""
