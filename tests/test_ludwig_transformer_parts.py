"""Ludwig's transformer parts (the FT-Transformer combiner and the transformer sequence encoder) in
the step plan, kernel by kernel, against FLOPs and bytes worked out by hand from Ludwig's module
definitions.

Sizes, Ludwig 0.17.10 (site-packages/ludwig of `make ludwig-env`):
- ludwig/schema/combiners/common_transformer_options.py CommonTransformerConfig (the FT-Transformer
  combiner's fields, ludwig/schema/combiners/ft_transformer.py FTTransformerCombinerConfig):
  dropout 0.1 (line 13-14), transformer_output_size 256 (line 21-22), hidden_size 256 (line 28-29),
  num_layers 1 (line 35-36), num_heads 8 (line 41-42), num_fc_layers 0 (line 58-59).
- ludwig/schema/encoders/sequence_encoders.py StackedTransformerConfig (text `transformer`):
  num_layers 1, hidden_size 256, num_heads 8, transformer_output_size 256, dropout 0.1,
  reduce_output "last" (lines 893-985).
- ludwig/combiners/combiners.py FTTransformerCombiner (line 1026-1098): one Linear(feature output
  size, hidden_size) per input feature (`projectors`), a [CLS] token, TransformerStack over
  len(input_features) + 1 tokens, the [CLS] output.
- ludwig/modules/attention_modules.py TransformerBlock: q/k/v Linear(d, d) and combine_heads Linear(d,
  d) (MultiHeadSelfAttention), F.scaled_dot_product_attention with no mask, dropout1, layernorm1
  (inputs + attention), Linear(d, transformer_output_size) -> ReLU -> Linear(transformer_output_size,
  d), dropout2, layernorm2 (residual).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest
import yaml

from perfmodel.analytic.step import plan_step
from perfmodel.config import load_workload
from perfmodel.workload import ModelSpec

D, HEADS, FF, LAYERS = 256, 8, 256, 1  # CommonTransformerConfig defaults (module docstring)
NUMBERS = ["age", "income", "hours", "score"]
CATEGORIES = {"workclass": 8, "education": 16, "region": 40}
BATCH = 64


def _tabular(tmp_path: Path) -> Path:
    rows = 400
    data: dict[str, list] = {n: [float(i % 13) for i in range(rows)] for n in NUMBERS}
    data.update({c: [f"{c[0]}{i % k}" for i in range(rows)] for c, k in CATEGORIES.items()})
    data["flag"] = ["yes" if i % 2 else "no" for i in range(rows)]
    data["label"] = [i % 2 for i in range(rows)]
    path = tmp_path / "tab.csv"
    pd.DataFrame(data).to_csv(path, index=False)
    return path


def _ft_workload(tmp_path: Path):
    cfg = {
        "input_features": [{"name": n, "type": "number"} for n in NUMBERS]
        + [{"name": c, "type": "category"} for c in CATEGORIES]
        + [{"name": "flag", "type": "binary"}],
        "output_features": [{"name": "label", "type": "binary"}],
        "trainer": {"batch_size": BATCH, "epochs": 1},
    }  # no combiner section, 8 inputs: Ludwig builds its FT-Transformer
    path = tmp_path / "ft.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return load_workload(path, dataset=_tabular(tmp_path), gpu="cpu")


def _part(plan):
    """The transformer part's forward kernels (the residual gradient accumulation is an add priced as
    a forward-phase kernel, but runs in backward)."""
    return [
        k
        for k in plan.kernels
        if k.label.startswith("transformer part") and k.work.phase == "forward" and "gradient" not in k.label
    ]


def test_ft_transformer_flops_and_bytes_per_sample_by_hand(tmp_path):
    w = _ft_workload(tmp_path)
    m = w.model
    features, tokens = 8, 9  # 8 input features + [CLS]
    widths = 4 * 1 + (8 + 16 + 40) + 1  # number passthrough 1; dense category = its vocabulary (< 50); binary 1
    assert (m.part_layers, m.part_tokens, m.part_hidden_size, m.part_num_heads, m.part_ffn_size) == (
        LAYERS,
        tokens,
        D,
        HEADS,
        FF,
    )
    assert m.part_inputs == features and m.part_input_width == pytest.approx(widths / features)
    assert m.params_total == 417_921  # Ludwig's own count (tests/test_ludwig_model.py)

    # forward FLOPs per sample of the model estimate (a multiply-add = 2 FLOPs):
    projections = 2 * widths * D  # 8 Linear(w_i, 256)
    qkvo = 4 * 2 * D * D * tokens  # q, k, v, combine_heads over 9 tokens
    ffn = 2 * 2 * D * FF * tokens  # Linear(256, 256) -> ReLU -> Linear(256, 256)
    attention = 4 * tokens * tokens * D  # QK^T and (softmax) V: 2 s^2 d each, over all heads
    stack = LAYERS * (qkvo + ffn + attention)
    assert stack + projections == 7_196_160
    head = 2 * D * 1  # the binary decoder: Linear(256, 1)
    assert m.forward_gflops_per_sample * 1e9 == pytest.approx(stack + projections + head, rel=1e-5)

    # the step plan, kernel by kernel: the same FLOPs (projections at the mean width, rounded: 9)
    plan = plan_step(w)
    fwd = _part(plan)
    per_sample_flops = sum(k.work.flops * k.calls for k in fwd) / BATCH
    assert per_sample_flops == pytest.approx(stack + 2 * 9 * features * D, rel=1e-9)
    by_label = {k.label: k for k in fwd}
    for name in ("q_proj", "k_proj", "v_proj", "o_proj", "fc1", "fc2"):
        assert by_label[f"transformer part layer {name} forward"].work.shape == (BATCH * tokens, D, D, 1)
    att = by_label["transformer part layer attention forward"].work
    assert att.shape == (BATCH, HEADS, tokens, tokens, D // HEADS, 0)  # no causal mask
    assert by_label["transformer part per-feature input projection forward"].calls == features

    # forward bytes per sample (fp32, 4 bytes; the ideal traffic: every input read once, every output
    # written once), T = tokens of the micro-batch:
    e, T = 4, BATCH * tokens
    norm = 2 * (2 * T * D * e + D * e + T * 4)  # 2 layer norms: x read, y written, weight, per-row stats
    matmul = 6 * (T * D + D * D + T * D) * e  # q, k, v, o, fc1, fc2: input, weight, output
    proj = features * (BATCH * 9 + 9 * D + BATCH * D) * e
    hd = D // HEADS
    flash = BATCH * HEADS * (4 * tokens) * hd * e + BATCH * HEADS * tokens * 4  # q, k, v read, o written, lse
    dropout = 2 * (2 * e + 1) * T * D  # 2 dropouts: x read, y written, a 1-byte mask
    residual = 2 * 3 * e * T * D  # 2 residual adds: two inputs, one output
    relu = 2 * e * T * FF
    transpose = 2 * e * T * D  # attention output (b, h, s, hd) -> (b, s, d) before combine_heads
    stack_cat = 2 * 2 * e * T * D  # torch.stack of the projections, torch.cat with [CLS]
    expected = norm + matmul + proj + flash + dropout + residual + relu + transpose + stack_cat
    got = sum(k.work.bytes * k.calls for k in fwd)
    assert got / BATCH == pytest.approx(expected / BATCH, rel=1e-9)
    kinds = {k.work.kind for k in fwd}
    assert kinds == {"matmul", "attention", "norm", "elementwise", "activation"}


def test_ft_transformer_layers_and_width_scale_the_plan(tmp_path):
    """Two layers of width 512 (a config's combiner section): the layer kernels run twice, each
    matmul 4x the FLOPs of width 256."""
    w = _ft_workload(tmp_path)
    base = sum(k.work.flops * k.calls for k in _part(plan_step(w)) if "q_proj" in k.label)
    bigger = dataclasses.replace(
        w, model=dataclasses.replace(w.model, part_layers=2, part_hidden_size=512, part_ffn_size=512)
    )
    q = sum(k.work.flops * k.calls for k in _part(plan_step(bigger)) if "q_proj" in k.label)
    assert q == pytest.approx(2 * 4 * base)


def test_transformer_text_encoder_attention_as_ludwig_computes_it(tmp_path):
    rows = [" ".join(f"w{(i * 7 + j) % 97}" for j in range(60 if i == 0 else 10 + i % 20)) for i in range(90)]
    data = tmp_path / "text.csv"
    pd.DataFrame({"review": rows, "label": [f"l{i % 3}" for i in range(90)]}).to_csv(data, index=False)
    cfg = {
        "input_features": [{"name": "review", "type": "text", "encoder": {"type": "transformer"}}],
        "output_features": [{"name": "label", "type": "category"}],
        "trainer": {"batch_size": 16, "epochs": 1},
    }
    path = tmp_path / "text.yaml"
    path.write_text(yaml.safe_dump(cfg))
    w = load_workload(path, dataset=data, gpu="cpu")
    m = w.model
    seq = 62  # longest row 60 tokens + start/stop
    assert (m.part_layers, m.part_tokens, m.part_hidden_size, m.part_num_heads) == (1, seq, 256, 8)
    assert m.part_vocab_size == 97 + 4 and m.part_inputs == 0
    plan = plan_step(w)
    fwd = {k.label: k.work for k in _part(plan)}
    att = fwd["transformer part layer attention forward"]
    assert att.shape == (16, 8, seq, seq, 32, 0)
    assert att.flops == pytest.approx(4 * 16 * 8 * seq * seq * 32)  # QK^T + AV over every score
    assert fwd["transformer part token embedding forward"].shape == (16 * seq, 101, 256)
    assert fwd["transformer part position embedding forward"].shape == (16 * seq, seq, 256)
    stack = 2 * (4 * 256 * 256 + 2 * 256 * 256) * seq + 4 * seq * seq * 256
    assert sum(k.work.flops * k.calls for k in _part(plan)) / 16 == pytest.approx(stack, rel=1e-9)


def test_part_fields_are_checked():
    base = dict(name="x", arch="mlp", params_total=10, forward_gflops_per_sample=1.0)
    with pytest.raises(ValueError, match="part_tokens must be >= 1"):
        ModelSpec(**base, part_layers=1)
    with pytest.raises(ValueError, match="divisible"):
        ModelSpec(**base, part_layers=1, part_tokens=9, part_hidden_size=256, part_num_heads=7, part_ffn_size=256)
    with pytest.raises(ValueError, match="inside an mlp/cnn/other"):
        ModelSpec(name="t", arch="encoder", hidden_size=8, num_layers=1, num_heads=1, part_layers=1)


def test_the_optimizer_updates_the_parts_tensors(tmp_path):
    """Ludwig's FT-Transformer model of the 8-feature table holds 38 parameter tensors: 8 projectors'
    weight and bias (16), [CLS] (1), one TransformerBlock (16), 3 category embeddings, the binary
    decoder's weight and bias (2). perfmodel counts 35 (the encoders' embeddings are not in the
    model section): CPU AdamW runs its for-loop ops once per tensor, so this sets the optimizer's
    launches (one tensor before issue 24)."""
    from perfmodel.analytic.overhead import trainable_tensors

    w = _ft_workload(tmp_path)
    assert trainable_tensors(w) == 16 + 8 * 2 + 1 + 2
    opt = [k for k in plan_step(w).kernels if k.per_step]
    assert opt and opt[0].work.shape[1] == 35


def test_cpu_dropout_masks_are_drawn_serially(tmp_path):
    """On a CPU PyTorch's dropout draws its mask element by element (bernoulli_; the fused kernel is
    CUDA's): the FT-Transformer's two dropouts over (batch x 9 tokens x 256) elements cost
    CPU_DROPOUT_S_PER_ELEMENT each on the host, and nothing of the kind on a GPU."""
    from perfmodel.analytic import conventions as cv
    from perfmodel.catalog import get_gpu

    w = _ft_workload(tmp_path)
    plan = plan_step(w)
    assert plan.host_serial_s == pytest.approx(2 * BATCH * 9 * D * cv.CPU_DROPOUT_S_PER_ELEMENT)
    on_gpu = dataclasses.replace(w, gpu=get_gpu("A100-80GB"))
    assert plan_step(on_gpu).host_serial_s == 0.0
