"""The step plan (perfmodel.analytic.step): which kernels one training step runs, checked against
the FLOP convention, the recipes and the parts of a layer, independent of any efficiency."""

from __future__ import annotations

import dataclasses

import pytest

from perfmodel.analytic.params import count_params
from perfmodel.analytic.step import plan_step
from perfmodel.catalog import get_gpu, get_model
from perfmodel.workload import ParallelSpec, TrainingSpec, Workload


def _w(model: str = "llama2-7b", gpu: str = "A100-80GB", framework: str = "hf-eager", **training) -> Workload:
    kw = {"seq_len": 512, "micro_batch_size": 4, "precision": "bf16", "tokens": 1e6, **training}
    return Workload(model=get_model(model), training=TrainingSpec(**kw), gpu=get_gpu(gpu),
                    parallel=ParallelSpec(num_gpus=1), framework=framework)  # fmt: skip


def _by(plan, text: str) -> list:
    return [k for k in plan.kernels if text in k.label]


def test_matmul_flops_of_full_training_are_six_n_per_token():
    """Forward 2N, input gradient 2N, weight gradient 2N per token for every matmul weight
    (conventions.py: 6 * N_matmul), attention apart."""
    w = _w()
    plan = plan_step(w)
    tokens = 4 * 512
    n = count_params(w.model, w.training).matmul_active
    assert plan.flops("matmul") == pytest.approx(6 * n * tokens, rel=1e-4)  # N counts the norms too


def test_lora_freezes_the_base_so_its_matmuls_skip_the_weight_gradient():
    """4N per token for the frozen base (PEFT LoRA); the adapters' own matmuls are tiny."""
    w = _w(lora_r=16)
    plan = plan_step(w)
    n = count_params(w.model, w.training).matmul_active
    base = sum(k.work.flops * k.calls for k in plan.kernels if k.work.kind == "matmul" and "lora" not in k.label)
    assert base == pytest.approx(4 * n * 4 * 512, rel=1e-4)
    lora = sum(k.work.flops * k.calls for k in plan.kernels if "lora" in k.label and k.work.kind == "matmul")
    assert 0 < lora < 0.01 * base
    assert not [k for k in plan.kernels if "embedding backward" in k.label]  # a frozen table gets no gradient


def test_a_partly_frozen_model_computes_every_input_gradient_and_its_share_of_weight_gradients():
    """training.trainable_fraction f (not LoRA): 4N + 2N f per token, as conventions.py counts it
    (perfmodel.analytic.flops), and the embedding's dense gradient f of the time. f = 1 is the
    full plan; LN tuning (PEFT: 175,104 norm weights of Llama-3.2-3B's 3,212,749,824) is almost
    LoRA's frozen base."""
    tokens = 4 * 512
    n = count_params(_w().model, _w().training).matmul_active
    for f, dense in ((0.5, 2.0 * n * 0.5), (175104 / 3212749824, 2.0 * n * 5.45e-5)):
        plan = plan_step(_w(trainable_fraction=f))
        assert plan.flops("matmul") == pytest.approx((4 * n + dense) * tokens, rel=1e-3)
        (emb,) = _by(plan, "embedding backward")
        assert emb.calls == pytest.approx(f)
        assert sum(k.calls for k in _by(plan, "weight gradient")) > 0  # each weight's dW, scaled
    full = plan_step(_w(trainable_fraction=1.0))
    assert [k.label for k in full.kernels] == [k.label for k in plan_step(_w()).kernels]
    assert not _by(full, "weight gradient")


def test_ln_tuning_is_priced_below_lora_as_peft_measured_it_on_an_l40s():
    """PEFT's method comparison on one L40S (Llama-3.2-3B, bf16, micro-batch 4, 210 tokens;
    shared/data/public/peft_method_comparison.csv): LN tuning 0.1054-0.1086 s a step, LoRA r=32 on
    q_proj, v_proj 0.1170-0.1239 s, full fine-tuning 0.3625-0.3663 s, on the same torch versions.
    With every weight gradient computed LN tuning came out slower than LoRA."""
    from perfmodel.analytic import estimate

    def t(**kw):
        return estimate(_w("llama3.2-3b", "L40S", seq_len=210, **kw)).t_bound_s

    ln, lora, full = t(trainable_fraction=175104 / 3212749824), t(lora_r=32), t()
    assert ln < lora < full


def test_checkpointing_runs_each_layers_forward_once_more():
    plain, ckpt = plan_step(_w()), plan_step(_w(activation_checkpointing=True))
    layers = 32
    recompute = sum(k.work.flops * k.calls for k in ckpt.kernels if "recompute" in k.label and k.work.kind == "matmul")
    forward = sum(k.work.flops * k.calls for k in plain.kernels if "layer" in k.label and "forward" in k.label
                  and k.work.kind == "matmul")  # fmt: skip
    assert recompute == pytest.approx(forward, rel=1e-9) and layers > 0


def test_a_recipe_decides_which_kinds_run_fused_and_fewer_launches_follow():
    eager, liger = plan_step(_w()), plan_step(_w(framework="liger"))
    assert {k.work.impl for k in _by(eager, "layer norm")} == {"eager"}
    assert {k.work.impl for k in _by(liger, "layer norm")} == {"fused"}
    assert {k.work.impl for k in _by(liger, "layer rotary")} == {"fused"}
    assert _by(liger, "fused linear cross-entropy") and not _by(liger, "logits upcast")
    assert liger.launches(per_step=False) < 0.7 * eager.launches(per_step=False)


def test_torch_nn_rmsnorm_is_one_kernel_on_a_gpu_and_op_by_op_on_a_cpu():
    gpu = {k.work.variant for k in _by(plan_step(_w(framework="torch-eager")), "layer norm")}
    cpu = {k.work.variant for k in _by(plan_step(_w(framework="torch-eager", gpu="cpu-2c-cba6f5", model="gpt2")),
                                        "layer norm")}  # fmt: skip
    assert gpu == {"rms-torch"}
    assert cpu == {"layer"}  # GPT-2 has LayerNorm; a Llama on a CPU:
    tiny = dataclasses.replace(get_model("llama3.2-1b"))
    w = Workload(model=tiny, training=TrainingSpec(seq_len=64, micro_batch_size=1, precision="fp32", tokens=1e4),
                 gpu=get_gpu("cpu-2c-cba6f5"), parallel=ParallelSpec(num_gpus=1), framework="torch-eager")  # fmt: skip
    assert {k.work.variant for k in _by(plan_step(w), "layer norm")} == {"rms"}


def test_autocast_adds_casts_of_matmul_inputs_weights_and_gradients():
    amp = plan_step(_w(precision="amp_bf16"))
    assert _by(amp, "input cast") and _by(amp, "autocast weight casts") and _by(amp, "gradient casts")
    assert [k.label for k in _by(plan_step(_w()), "cast")] == ["logits upcast forward", "logits upcast backward"]


def test_qlora_dequantizes_every_base_matrix_in_forward_and_backward():
    q = plan_step(_w(lora_r=16, quantization_bits=4))
    deq = _by(q, "dequantize")
    assert len(deq) == 7  # q, k, v, o, gate, up, down
    weights = sum(k.work.shape[0] for k in deq) * 32
    n_blocks = count_params(get_model("llama2-7b")).blocks
    assert weights == pytest.approx(n_blocks, rel=0.01)  # every block matrix, not norms or the head
    assert {k.calls for k in deq} == {2.0 * 32}  # forward and backward (input gradient), 32 layers


def test_the_optimizer_step_is_per_step_and_uses_the_recipes_implementation():
    hf = [k for k in plan_step(_w()).kernels if k.per_step]
    eager = [k for k in plan_step(_w(framework="torch-eager")).kernels if k.per_step]
    assert [k.work.variant for k in hf] == ["clip-foreach", "adamw-fused"]  # the Trainer clips first
    assert [k.work.variant for k in eager] == ["adamw-foreach"]
    cpu = [k for k in plan_step(_w(framework="hf-eager", gpu="cpu-2c-cba6f5", model="gpt2", precision="fp32")).kernels
           if k.per_step]  # fmt: skip
    assert [k.work.variant for k in cpu] == ["clip-forloop", "adamw-forloop"]  # PyTorch's CPU default


def test_gradient_clipping_reads_every_gradient_twice_and_writes_it_once():
    """torch.nn.utils.clip_grad_norm_ (the Trainer's max_grad_norm 1.0, the hf-eager default): the
    norm reads each bf16 gradient (2 B), the scaling reads and writes it (4 B): 6 B per trainable
    parameter of a bf16 model; launches: two multi-tensor ops over Llama-2-7B's 6.74 B parameters in
    291 tensors, each 323 launches (multi_tensor_apply: 65,536-element chunks, at most 320 a launch:
    6.74e9 / 65,536 + 291 = 103,111 chunks) plus stack, vector_norm and the coefficient's add, div
    and clamp. Off with
    training.gradient_clipping false, on for a stack that does not clip by default when it says true."""
    import math

    w = _w()
    (clip,) = _by(plan_step(w), "gradient clipping")
    n = count_params(w.model, w.training).trainable
    assert clip.work.bytes_moved == pytest.approx(6.0 * n) and clip.per_step
    assert n == pytest.approx(6.74e9, rel=1e-3)
    assert clip.work.launches == 2 * math.ceil((n / 65536 + 291) / 320) + 5 == 2 * 323 + 5
    assert not _by(plan_step(_w(gradient_clipping=False)), "gradient clipping")
    assert not _by(plan_step(_w(framework="torch-eager")), "gradient clipping")
    assert _by(plan_step(_w(framework="torch-eager", gradient_clipping=True)), "gradient clipping")
    lora = _by(plan_step(_w(lora_r=16)), "gradient clipping")  # only the adapters' fp32 gradients
    assert lora[0].work.bytes_moved == pytest.approx(12.0 * count_params(w.model, _w(lora_r=16).training).trainable)


def test_fp16_autocast_unscales_every_gradient_once_a_step():
    """torch.amp.GradScaler with fp16 autocast (amp_fp16): unscale_ reads and writes each fp32
    gradient once (_amp_foreach_non_finite_check_and_unscale_, one multi-tensor op: 8 B per
    parameter, 53.9 GB for Llama-2-7B's 6.74 B) before clipping and the step, plus 6 kernels on
    device scalars; bf16 autocast needs no loss scaling."""
    import math

    w = _w(precision="amp_fp16")
    per_step = [k for k in plan_step(w).kernels if k.per_step]
    assert [k.work.variant for k in per_step] == ["amp-unscale", "clip-foreach", "adamw-fused"]
    n = count_params(w.model, w.training).trainable
    assert per_step[0].work.bytes_moved == pytest.approx(8.0 * n) == pytest.approx(53.9e9, rel=1e-3)
    assert per_step[0].work.launches == math.ceil((n / 65536 + 291) / 320) + 6 == 329
    assert not _by(plan_step(_w(precision="amp_bf16")), "unscaling")


def test_ddp_copies_every_gradient_into_its_bucket_and_back_once_a_step():
    """torch DistributedDataParallel (gradient_as_bucket_view False, its default): reducer.cpp's
    copy_grad_to_bucket writes each gradient into the flat bucket scaled by 1 / world (mul_out: read
    it, write it) and finalize_bucket_dense copies the reduced bucket back (read, write): 4 B moved
    per bf16 parameter each way, 8 B in all, 53.9 GB for Llama-2-7B's 6.74 B; one kernel per
    trainable tensor each way (291). Not on one GPU, not under FSDP, not for Megatron's contiguous
    grad buffers."""
    w = dataclasses.replace(_w(), parallel=ParallelSpec(num_gpus=8, strategy="ddp"))
    into, back = (_by(plan_step(w), f"DDP gradients {x}") for x in ("into", "back"))
    n = count_params(w.model, w.training).trainable
    for (k,) in (into, back):
        assert k.per_step and k.calls == 291 and k.work.launches == 1
        assert k.work.bytes_moved * k.calls == pytest.approx(4.0 * n, rel=1e-6)
    assert into[0].work.variant == "scale" and back[0].work.variant == "copy"
    assert 2 * 4.0 * n == pytest.approx(53.9e9, rel=1e-3)
    fp32 = dataclasses.replace(w, training=dataclasses.replace(w.training, precision="amp_bf16"))
    assert _by(plan_step(fp32), "DDP gradients into")[0].work.bytes_moved * 291 == pytest.approx(8.0 * n, rel=1e-6)
    assert not _by(plan_step(_w()), "DDP gradients")  # one GPU: nothing to reduce
    fsdp = dataclasses.replace(w, parallel=ParallelSpec(num_gpus=8, strategy="fsdp"))
    assert not _by(plan_step(fsdp), "DDP gradients")
    assert not _by(plan_step(dataclasses.replace(w, framework="megatron")), "DDP gradients")


def test_clipping_closes_part_of_the_full_fine_tune_gap_peft_measured_on_an_l40s():
    """PEFT's method comparison on one L40S (Llama-3.2-3B, bf16, micro-batch 4, 210 tokens,
    grad_norm_clip 1.0): a full fine-tuning step 0.3625-0.3666 s, a LoRA r=64 (q_proj, v_proj) step
    0.1189-0.1261 s, so the full fine-tune's weight gradients, optimizer and clipping take 0.24 s.
    Clipping 3.2 B bf16 gradients moves 19 GB (22 ms at the L40S's datasheet 864 GB/s); without it
    the predicted gap was 0.156 s."""
    from perfmodel.analytic import estimate

    def t(**kw):
        return estimate(_w("llama3.2-3b", "L40S", seq_len=210, **kw)).t_bound_s

    gap = t() - t(lora_r=64)
    unclipped = t(gradient_clipping=False) - t(lora_r=64, gradient_clipping=False)
    assert unclipped < gap <= 0.2436
    assert gap - unclipped > 0.022  # at most the datasheet bandwidth


def test_tensor_parallelism_splits_the_layer_widths():
    one = plan_step(_w())
    w = dataclasses.replace(_w(), parallel=ParallelSpec(num_gpus=2, tensor_parallel=2))
    two = plan_step(w)
    assert two.flops("matmul") == pytest.approx(one.flops("matmul") / 2, rel=0.01)


def test_a_models_dropouts_run_as_kernels_and_sdpa_draws_the_attention_mask_inside():
    # GPT-2 large (resid/attn/embd_pdrop 0.1), fp32, batch 2 x 1024, eager attention: per layer two
    # residual dropouts over tokens x d and one over the 20 x 1024 x 1024 attention probabilities;
    # CUDA's native_dropout reads x, writes y and a 1-byte mask: (4 + 4 + 1) bytes an element
    w = _w("gpt2-large", precision="fp32", micro_batch_size=2, seq_len=1024, attention_kernel="eager")
    assert w.model.dropout == 0.1
    plan = plan_step(w)
    layers = w.model.num_layers
    (probs,) = _by(plan, "attention-probability dropout forward")
    assert probs.work.bytes_moved == 9 * 2 * 20 * 1024 * 1024 and probs.calls == layers
    (resid,) = _by(plan, "residual dropout forward")
    assert resid.work.bytes_moved == 9 * 2 * 1024 * 1280 and resid.calls == 2 * layers
    assert _by(plan, "embedding dropout forward") and _by(plan, "attention-probability dropout backward")
    sdpa = plan_step(dataclasses.replace(w, training=dataclasses.replace(w.training, attention_kernel="sdpa")))
    assert not _by(sdpa, "attention-probability dropout") and _by(sdpa, "residual dropout forward")
    llama = plan_step(_w())  # no dropout in Llama's config
    assert not _by(llama, "dropout")


def test_an_mlp_reads_and_writes_what_it_saves_for_backward_once_per_layer():
    """NCF (catalog ncf.yaml: 0.0021 MB saved per sample at 2 bytes = 1,050 elements; 0.000213
    GFLOPs): besides its matmuls, one elementwise kernel per matmul layer writes its share of the
    saved elements in forward and its backward reads and writes it again, costed as an add (two
    inputs read, one output written, as the CNN plan's 'relu / residual'). At 1,048,576 samples, fp32
    activations: 1,050 x 1,048,576 = 1.10e9 elements, so the forward pass moves 3 x 4 bytes of each
    = 13.2 GB."""
    w = _w("ncf", precision="fp32", micro_batch_size=1_048_576, seq_len=None)
    plan = plan_step(w)
    fwd = _by(plan, "activation / norm / residual forward")
    bwd = _by(plan, "activation / norm / residual backward")
    assert len(fwd) == len(bwd) == 1
    elements = 0.0021e6 / 2 * 1_048_576
    assert fwd[0].work.bytes * fwd[0].calls == pytest.approx(12 * elements, rel=0.01)
    # an add's backward reads the output gradient and writes both input gradients: as many bytes
    assert bwd[0].work.bytes * bwd[0].calls == pytest.approx(fwd[0].work.bytes * fwd[0].calls)
    matmul_calls = sum(k.calls for k in plan.kernels if "mlp layers forward" in k.label)
    assert fwd[0].calls == pytest.approx(max(1.0, matmul_calls))
    no_grads = plan_step(_w("ncf", precision="fp32", micro_batch_size=1_048_576, seq_len=None, trainable_fraction=0))
    assert not _by(no_grads, "activation / norm / residual backward")


def test_a_recommenders_tables_are_looked_up_and_its_mlp_runs_over_the_rest():
    """NCF (catalog ncf.yaml, DeepLearningExamples' NeuMF on ml-20m): 31,832,577 parameters, of which
    (138,493 + 26,744) x (64 + 128) = 31,725,504 in the embedding tables, so the four matmul layers
    share 107,073: sqrt(107,073 / 4) = 164 wide, over one row a sample (0.000213 GFLOPs / (2 x 107,073)
    = 1.0). Each sample looks up 4 rows of mean width 96 from 31,725,504 / 96 = 330,474 rows: at
    1,048,576 samples, 4,194,304 lookups; backward writes the whole table's gradient. Before the
    tables were split off, the matmuls were sqrt(31.8 M) = 5,642 wide and the lookups not costed."""
    w = _w("ncf", precision="amp_fp16", micro_batch_size=1_048_576, seq_len=None)
    plan = plan_step(w)
    (mm,) = _by(plan, "mlp layers forward")
    assert mm.work.shape[:3] == (1_048_576, 164, 164)
    assert mm.calls * mm.work.flops == pytest.approx(0.000213e9 * 1_048_576, rel=1e-6)  # the catalog figure
    (emb,) = _by(plan, "embedding lookups forward")
    assert emb.work.shape == (4_194_304, 330_474, 96)
    (back,) = _by(plan, "embedding lookups backward")
    assert back.work.bytes >= 330_474 * 96 * 2  # the dense table gradient, written once at least


def test_a_cnns_batch_norms_read_half_of_what_it_saves_for_backward():
    """A CNN known only by its FLOPs and what it saves, here ResNet-50's figures (catalog resnet50.yaml: 42 MB saved per 224-px image at 2 bytes = 21.0 M elements):
    each convolution saves its input and each batch norm its input (the convolution's output), the
    in-place ReLU's result is the next convolution's input, so the batch norms read half of it:
    10.5 M elements an image, 672 M at micro-batch 64. timm counts ResNet-50's convolution outputs
    as 11.11 M (its inference CSV; tests/test_public_import_timm.py checks the rule against it)."""
    cnn = dataclasses.replace(get_model("resnet50"), name="cnn-by-its-flops", family="cnn-other")
    w = dataclasses.replace(_w("resnet50", precision="fp32", micro_batch_size=64, seq_len=None), model=cnn)
    plan = plan_step(w)
    (bn,) = _by(plan, "batch norm forward")
    rows, cols = bn.work.shape
    assert rows * cols * bn.calls == pytest.approx(42e6 / 2 / 2 * 64, rel=0.01)
    (relu,) = _by(plan, "relu / residual forward")
    assert relu.work.shape[1] * relu.calls == pytest.approx(2 * rows * cols * bn.calls, rel=0.01)


def _counted(model: str, gemm_layers: int | None = None, **changes) -> Workload:
    changes.setdefault("gemm_layers", gemm_layers)
    cnn = dataclasses.replace(get_model(model), name="by-its-counts", family="cnn-other", **changes)
    return dataclasses.replace(_w(model, precision="amp_bf16", micro_batch_size=2, seq_len=None), model=cnn)


def test_a_cnn_with_its_layers_counted_runs_that_many_convolutions_whatever_its_flops():
    """ResNet-50's count as timm_kernel_census.py makes it (53 convolutions and the classifier: 54
    GEMMs a forward, collectors/public/timm_kernel_census.csv) costs 54 convolutions forward, each
    launched once, and one batch norm per convolution, at ResNet-50's FLOPs and at 100 times them
    (a wider model at a larger image: resnetv2_152x4 at 480 px has 156 GEMMs for 206 x the FLOPs).
    Without the count the plan cuts the FLOPs into reference-size convolutions: 17.7 for ResNet-50 (8.18 GFLOPs / 0.462),
    100 times that for the larger one. The FLOPs are the model's either way."""
    for scale in (1.0, 100.0):
        flops = get_model("resnet50").forward_gflops_per_sample * scale
        plan = plan_step(_counted("resnet50", 54, forward_gflops_per_sample=flops))
        (conv,) = [k for k in plan.kernels if k.label == "convolutions forward"]
        assert conv.calls == pytest.approx(54, rel=0.05)
        assert conv.work.flops * conv.calls == pytest.approx(flops * 1e9 * 2, rel=1e-6)
        (bn,) = _by(plan, "batch norm forward")
        assert bn.calls == pytest.approx(conv.calls)
        old = plan_step(_counted("resnet50", None, forward_gflops_per_sample=flops))
        (ref,) = [k for k in old.kernels if k.label == "convolutions forward"]
        assert ref.calls == pytest.approx(8.18e9 / (2 * 784 * 128 * 256 * 9) * scale, rel=0.01)


def test_a_cnns_depthwise_convolutions_stream_their_inputs_and_outputs_apart_from_the_gemms():
    """EfficientNet-B0 at 224 px, worked by hand from its blocks: 16 depthwise convolutions (one per
    MBConv block) that read and write 802,816 (32 ch @ 112) + 1,505,280 (96 @ 112 -> 56) + 903,168
    + 564,480 + 376,320 + 235,200 + 2 x 188,160 + 188,160 + 2 x 263,424 + 164,640 + 3 x 112,896 +
    112,896 = 6,094,816 elements an image (the census: 6.09482 M, and 82 GEMMs a forward). Each is
    costed as a stream over its input and output (2 images: 380,926 outputs a layer at bf16:
    forward 2 x 2 bytes each), one BN per convolution still, and the 66 others carry the
    remaining FLOPs."""
    b0 = dict(gemm_layers=82, depthwise_layers=16, depthwise_gflops_per_sample=0.0690641,
              depthwise_melements_per_sample=6.09482, forward_gflops_per_sample=0.8, activation_mb_per_sample=80.0)  # fmt: skip
    plan = plan_step(_counted("resnet50", **b0))
    (dw,) = _by(plan, "depthwise convolutions (counted) forward")
    assert dw.calls == 16
    assert dw.work.kind == "elementwise" and dw.work.flops == 0
    assert dw.work.bytes == pytest.approx(2 * 6_094_816 / 16 / 2 * 2 * 2, rel=1e-4)
    assert _by(plan, "depthwise convolutions (counted) backward")
    (conv,) = [k for k in plan.kernels if k.label == "convolutions forward"]
    assert conv.calls == pytest.approx(66, rel=0.05)
    assert conv.work.flops * conv.calls == pytest.approx((0.8 - 0.0690641) * 1e9 * 2, rel=1e-6)
    (bn,) = _by(plan, "batch norm forward")
    assert bn.calls == pytest.approx(conv.calls + 16)


def test_a_cnns_grouped_convolutions_run_as_batched_gemms_one_group_wide():
    """ResNeXt-50 32x4d at 224 px, worked by hand: one 3x3 grouped convolution (32 groups) per
    bottleneck, 16 in all, 128 / 256 / 512 / 1024 channels at 56 / 28 / 14 / 7 px (groups 4, 8, 16,
    32 channels wide): each stage 28,901,376 FLOPs a block (401,408 outputs x 2 x 4 x 9 ...), 462.4 M
    in all; inputs + outputs 3 x 802,816 + (802,816 + 200,704) + 3 x 401,408 + (401,408 + 100,352)
    + 5 x 200,704 + (200,704 + 50,176) + 2 x 100,352 = 6,573,056 (the census: 0.462422 GFLOPs,
    6.57306 M, 16 layers of 54 GEMMs). At 2 images a layer has 410,816 outputs and 57.8 MFLOPs:
    K = 57.8 M / (2 x 410,816) = 70, so 8 channels a group, over 2 x 28 x 28 = 1,568 rows and
    410,816 / (1,568 x 8) = 33 groups; the 38 dense convolutions carry the rest of the FLOPs."""
    x50 = dict(gemm_layers=54, grouped_layers=16, grouped_gflops_per_sample=0.462422,
               grouped_melements_per_sample=6.57306, forward_gflops_per_sample=8.5, activation_mb_per_sample=200.0)  # fmt: skip
    plan = plan_step(_counted("resnet50", **x50))
    (grouped,) = _by(plan, "grouped convolutions (counted) forward")
    assert grouped.work.kind == "matmul"
    assert grouped.work.shape == (1568, 8, 70, 33)
    assert grouped.calls == pytest.approx(16, rel=0.05)
    assert grouped.work.flops * grouped.calls == pytest.approx(0.462422e9 * 2, rel=1e-6)
    assert _by(plan, "grouped convolutions (counted) backward")
    (conv,) = [k for k in plan.kernels if k.label == "convolutions forward"]
    assert conv.calls == pytest.approx(38, rel=0.05)
    assert conv.work.flops * conv.calls == pytest.approx((8.5 - 0.462422) * 1e9 * 2, rel=1e-6)


def test_a_hybrid_transformers_counted_attentions_run_on_the_math_path_with_their_own_flops():
    """BEiT-B/16 at 224 px by the census (collectors/public/timm_kernel_census.csv: 24 batched
    matmuls and 12 softmaxes a forward, 1.43065 GFLOPs and 5.5885 M scores an image): 12 heads x
    197 x 197 = 465,708 scores a layer, 12 layers = 5.588 M; 4 x 5.5885 M x 64 = 1.431 G, so the head
    width comes out 64. Each attention is costed as one head of sqrt(465,708) = 682 queries and
    keys of width 64 (the same scores and FLOPs), and the convolutions carry the rest of the model's
    FLOPs."""
    beit = dict(gemm_layers=50, attention_layers=12, attention_gflops_per_sample=1.43065,
                attention_mscores_per_sample=5.5885, forward_gflops_per_sample=35.2, activation_mb_per_sample=300.0)  # fmt: skip
    w = _counted("resnet50", **beit)
    plan = plan_step(w)
    (att,) = _by(plan, "attention (counted) forward")
    assert att.calls == 12
    batch, heads, s_q, s_kv, head_dim = att.work.shape[:5]
    assert (batch, heads, s_q, s_kv, head_dim) == (2, 1, 682, 682, 64)
    assert att.work.flops * att.calls == pytest.approx(1.43065e9 * 2, rel=0.01)
    (conv,) = [k for k in plan.kernels if k.label == "convolutions forward"]
    assert conv.work.flops * conv.calls == pytest.approx((35.2 - 1.43065) * 1e9 * 2, rel=1e-6)
    assert _by(plan, "attention (counted) backward")


def test_an_mlp_with_its_layers_counted_runs_its_matmuls_over_every_row_of_a_sample():
    """ResMLP-B24 (timm resmlp_big_24_224: 129.1 M parameters, 100.23 GMACs an image, 74 GEMMs a
    forward by the census): 200.5 GFLOPs / (2 x 129.1 M) = 776 rows an image (its 28 x 28 = 784
    patches), each of 74 matmuls sqrt(129.1 M / 74) = 1,321 wide. Without the count, the plan has one
    row an image and 11,364-wide matmuls, far below a GPU's matmul efficiency."""
    mixer = dataclasses.replace(get_model("ncf"), name="resmlp-like", params_total=129_140_000,
                                forward_gflops_per_sample=200.46, activation_mb_per_sample=406.1, gemm_layers=74,
                                embedding_params=0, embedding_lookups_per_sample=0, embedding_dim=0)  # fmt: skip
    w = dataclasses.replace(_w("ncf", precision="amp_fp16", micro_batch_size=32, seq_len=None), model=mixer)
    (mm,) = _by(plan_step(w), "mlp layers forward")
    rows, width = mm.work.shape[:2]
    assert rows == pytest.approx(32 * 776, rel=0.01)
    assert width == pytest.approx(1321, abs=2)
    assert mm.calls == pytest.approx(74, rel=0.02)


def test_a_resnet_is_planned_layer_by_layer_as_torchvision_builds_it():
    """ResNet-50 at 224 px: 53 convolutions (the stem, 3 per bottleneck x 16, 4 strided shortcuts),
    a BatchNorm after each, 49 ReLUs (the stem's, 3 per block), 16 residual adds; forward FLOPs
    8.18 G an image (torchvision: 4.09 G multiply-adds, the classifier included), the backward
    twice that."""
    w = _w("resnet50", precision="amp_bf16", micro_batch_size=64, seq_len=None)
    plan = plan_step(w)
    fwd = [k for k in plan.kernels if k.label.endswith("forward")]
    assert len([k for k in fwd if k.work.kind == "conv"]) == 53
    assert len([k for k in fwd if k.work.variant == "batch"]) == 53
    assert len([k for k in fwd if k.work.variant == "relu"]) == 49
    assert len([k for k in fwd if "residual add" in k.label]) == 16
    forward_flops = sum(k.work.flops * k.calls for k in fwd)
    assert forward_flops / 64 == pytest.approx(2 * 4.09e9, rel=0.01)
    backward_flops = sum(k.work.flops * k.calls for k in plan.kernels if k.label.endswith("backward"))
    assert backward_flops == pytest.approx(2 * forward_flops, rel=0.01)
    assert not plan.notes  # its own layers: nothing approximated, so no warning


def test_a_resnets_narrow_1x1_convolution_is_memory_bound_on_an_h100():
    """Block 2's 1x1 reduce (256 -> 64 channels at 56x56, micro-batch 64, bf16): 2 x 200,704 x 64 x 256
    = 6.58 GFLOP over (51.38 M inputs + 12.85 M outputs + 16 k weights) x 2 bytes = 128.5 MB, 51 FLOP
    a byte; an H100 SXM streams 3.35 TB/s against 989 TFLOP/s (295 FLOP a byte), so its floor is the
    bytes': 38 us, not the 6.7 us of its FLOPs."""
    from perfmodel.kernels.efficiency import kernel_time

    w = _w("resnet50", gpu="H100-SXM", precision="bf16", micro_batch_size=64, seq_len=None)
    (k,) = _by(plan_step(w), "block 2 1x1 reduce conv forward")
    assert k.work.flops == pytest.approx(2 * 64 * 56 * 56 * 64 * 256)
    assert k.work.bytes == pytest.approx((64 * 256 * 56 * 56 + 64 * 256 + 64 * 64 * 56 * 56) * 2)
    priced = kernel_time(k.work, w.gpu)
    assert priced.floor_s == pytest.approx(k.work.bytes / 3.35e12, rel=0.02)
    assert priced.seconds >= priced.floor_s > 5 * k.work.flops / 989e12


def test_a_network_that_is_not_a_torchvision_resnet_keeps_the_representative_convolution():
    cnn = dataclasses.replace(get_model("resnet50"), params_total=25_560_000)  # timm's rounded count
    w = dataclasses.replace(_w("resnet50", precision="amp_bf16", micro_batch_size=64, seq_len=None), model=cnn)
    assert _by(plan_step(w), "convolutions forward")


def test_a_16_bit_model_under_apex_o2_runs_its_eager_softmax_on_the_16_bit_scores():
    # DeepLearningExamples' BERT under apex amp O2 (the dle-ngc recipe: softmax native) calls F.softmax
    # on fp16 scores: 4e bytes per score forward (division, softmax) against Hugging Face's 24 with its
    # fp32 softmax and casts; under autocast softmax runs in fp32 whatever the recipe says
    def forward_attention(framework: str, precision: str):
        w = _w("bert-large", framework=framework, precision=precision, seq_len=384, attention_kernel="eager")
        (k,) = [k for k in plan_step(w).kernels if k.work.kind == "attention" and k.work.phase == "forward"]
        return k.work

    scores = 4 * 16 * 384 * 384
    dle, hf = forward_attention("dle-ngc", "fp16"), forward_attention("hf-eager", "fp16")
    assert hf.bytes_moved - dle.bytes_moved == pytest.approx((24 - 8) * scores)
    assert dle.shape[-1] == 1 and len(hf.shape) == 6  # the native-softmax flag, only where it holds
    assert forward_attention("dle-ngc", "amp_fp16").bytes_moved == forward_attention("hf-eager", "amp_fp16").bytes_moved


def test_a_compiled_math_attention_runs_its_softmax_chain_as_one_kernel_with_the_dropout_inside():
    # BERT-large (attention_probs_dropout_prob 0.1) in autocast fp16 with eager attention: op by op the
    # scale, mask add, casts, softmax and a dropout of their own; compiled (torch.compile, or
    # TorchScript with NVFuser), one kernel per phase that draws the mask itself
    w = _w("bert-large", framework="hf-eager", precision="amp_fp16", seq_len=512, attention_kernel="eager")
    compiled = dataclasses.replace(w, training=dataclasses.replace(w.training, torch_compile=True))
    eager_plan, compiled_plan = plan_step(w), plan_step(compiled)
    assert _by(eager_plan, "attention-probability dropout") and not _by(compiled_plan, "attention-probability dropout")

    def attention(plan):
        (k,) = [k for k in plan.kernels if k.work.kind == "attention" and k.work.phase == "forward"]
        return k.work

    scores = 4 * 16 * 512 * 512
    assert attention(compiled_plan).shape[-1] == 4 | 2  # SCORES_FUSED | SCORES_DROPOUT
    # forward per score (an encoder: no causal mask): 4 (GEMMs) + 2 + 2 + 1 fused, against 4 + 24 op by op
    assert attention(eager_plan).bytes_moved - attention(compiled_plan).bytes_moved == pytest.approx((28 - 9) * scores)
