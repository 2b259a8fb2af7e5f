"""The analytic cost model pinned against published figures, with stated tolerances."""

from __future__ import annotations

import dataclasses

import pytest

from perfmodel.analytic import estimate
from perfmodel.analytic.flops import compute_step_flops
from perfmodel.analytic.memory import estimate_memory
from perfmodel.analytic.params import count_params
from perfmodel.catalog import get_gpu, get_model
from perfmodel.workload import ModelSpec, ParallelSpec, TrainingSpec, Workload


def make(model: str | ModelSpec = "llama2-7b", gpu: str = "A100-80GB", **kw) -> Workload:
    par_keys = {f.name for f in dataclasses.fields(ParallelSpec)}
    par = {k: kw.pop(k) for k in list(kw) if k in par_keys}
    spec = get_model(model) if isinstance(model, str) else model
    kw.setdefault("tokens", 1e9)
    return Workload(model=spec, training=TrainingSpec(**kw), gpu=get_gpu(gpu), parallel=ParallelSpec(**par))


def test_llama2_7b_parameter_count_matches_published():
    # Llama 2 7B: 6,738,415,616 parameters (Hugging Face model card / safetensors index).
    assert count_params(get_model("llama2-7b")).total == pytest.approx(6.738415616e9, rel=1e-4)


def test_catalog_parameter_counts_match_published_within_3_percent():
    import yaml

    from perfmodel.catalog import CATALOG_DIR

    checked = 0
    for path in sorted((CATALOG_DIR / "models").glob("*.yaml")):
        entry = yaml.safe_load(path.read_text())
        published = entry.get("published_params")
        if not published:
            continue
        ours = count_params(get_model(path.stem)).total
        assert ours == pytest.approx(float(published), rel=0.03), f"{path.stem}: {ours:.4g} vs {published:.4g}"
        checked += 1
    assert checked >= 1


# LLM Foundry scripts/train/benchmarking/README.md @ 495218376830947dce625efabc4d86be7c47cc45
# (model, n_layers, d_model, seq_len, gpu peak TFLOP/s, tokens/s/GPU, published MFU %)
# Peaks as collect_results.py used them: A100 312, H100 bf16 989, H100 fp8 1979 (dense).
FOUNDRY_ROWS = [
    ("mpt-70b a100_80gb 64 gpus", 80, 8192, 2048, 312, 410, 53.33),
    ("mpt-70b a100_40gb 128 gpus", 80, 8192, 2048, 312, 376, 48.91),
    ("mpt-30b a100_80gb 8 gpus s4096", 48, 7168, 4096, 312, 814, 51.37),
    ("mpt-70b h100 amp_bf16 64 gpus", 80, 8192, 2048, 989, 1039, 42.57),
    ("mpt-3b h100 amp_fp8 s8192", 32, 2560, 8192, 1979, 19146, 23.28),
]


@pytest.mark.parametrize("label,layers,d,seq,peak,tps,mfu_pct", FOUNDRY_ROWS)
def test_llm_foundry_mfu_reproduced_by_pinned_convention(label, layers, d, seq, peak, tps, mfu_pct):
    mpt = ModelSpec(
        name=label, family="mpt", arch="decoder", hidden_size=d, num_layers=layers, num_heads=d // 128,
        ffn_hidden_size=4 * d, vocab_size=50368, tied_embeddings=True,
    )
    w = make(mpt, seq_len=seq, micro_batch_size=1, precision="bf16")
    flops = compute_step_flops(w)
    mfu = flops.model_flops_per_token * tps / (peak * 1e12)
    assert mfu * 100 == pytest.approx(mfu_pct, rel=0.02)


def test_flops_conventions_full_lora_recompute_and_frozen():
    n = count_params(get_model("llama2-7b")).matmul_active
    full = compute_step_flops(make(seq_len=8, micro_batch_size=1))
    # 6N + 12Lds with s = 8: attention is negligible, so ~6N per token
    assert full.model_flops_per_token == pytest.approx(6 * n, rel=0.001)
    assert full.hardware_flops_per_token == pytest.approx(6 * n, rel=0.001)
    ckpt = compute_step_flops(make(seq_len=8, micro_batch_size=1, activation_checkpointing=True))
    assert ckpt.hardware_flops_per_token == pytest.approx(8 * n, rel=0.001)
    lora = compute_step_flops(make(seq_len=8, micro_batch_size=1, lora_r=16))
    assert lora.hardware_flops_per_token == pytest.approx(4 * n, rel=0.001)
    frozen = compute_step_flops(make(seq_len=8, micro_batch_size=1, trainable_fraction=0.0))
    assert frozen.hardware_flops_per_token == pytest.approx(2 * n, rel=0.001)
    # MFU numerator: no recomputation, and no weight-gradient FLOPs for frozen weights
    assert ckpt.model_flops_per_token == full.model_flops_per_token
    assert lora.model_flops_per_token == pytest.approx(4 * n, rel=0.001)


def test_step_flops_scale_with_batch_and_split_over_gpus():
    one = compute_step_flops(make(seq_len=512, micro_batch_size=4))
    eight = compute_step_flops(make(seq_len=512, micro_batch_size=4, num_gpus=8))
    assert eight.tokens_per_step == 8 * one.tokens_per_step
    assert eight.hardware_flops_per_gpu == pytest.approx(one.hardware_flops_per_gpu)


def test_memory_full_finetune_7b_amp_adam_is_16_bytes_per_param_plus_activations():
    mem = estimate_memory(make(seq_len=512, micro_batch_size=1, precision="amp_bf16"))
    states = mem.weights_gb + mem.gradients_gb + mem.optimizer_gb
    assert states == pytest.approx(16 * 6.738e9 / 1e9, rel=0.01)
    assert mem.total_gb > 80  # does not fit on one 80 GB GPU: the well-known result


def test_memory_qlora_7b_fits_on_a_24gb_card():
    w = make(gpu="RTX-4090", seq_len=512, micro_batch_size=1, lora_r=16, quantization_bits=4, activation_checkpointing=True)
    mem = estimate_memory(w)
    assert 3.3 < mem.weights_gb < 4.5  # 4-bit base: ~0.5 byte/param + adapters
    assert mem.total_gb < 24


def test_sharding_divides_states_and_checkpointing_shrinks_activations():
    ddp = estimate_memory(make(precision="amp_bf16", num_gpus=8, strategy="ddp"))
    z1 = estimate_memory(make(precision="amp_bf16", num_gpus=8, strategy="zero1"))
    z3 = estimate_memory(make(precision="amp_bf16", num_gpus=8, strategy="zero3"))
    assert z1.optimizer_gb == pytest.approx(ddp.optimizer_gb / 8)
    assert z1.weights_gb == ddp.weights_gb
    assert z3.weights_gb == pytest.approx(ddp.weights_gb / 8)
    plain = estimate_memory(make(seq_len=4096, micro_batch_size=4))
    ckpt = estimate_memory(make(seq_len=4096, micro_batch_size=4, activation_checkpointing=True))
    assert ckpt.activations_gb < plain.activations_gb / 5


def test_roofline_floor_single_gpu_is_compute_bound_for_large_batches():
    est = estimate(make(seq_len=2048, micro_batch_size=8))
    assert est.bottleneck == "compute"
    assert est.t_comm_exposed_s == 0.0
    # floor = hardware FLOPs / datasheet peak (A100 bf16 dense: 312 TFLOP/s)
    assert est.t_roofline_s == pytest.approx(est.flops.hardware_flops_per_gpu / 312e12)
    # the analytic step adds what the floor leaves out (elementwise kernels, optimizer step)
    assert est.t_bound_s > est.t_roofline_s


def test_communication_appears_across_nodes_and_grows_with_slower_links():
    one_node = estimate(make(num_gpus=8, num_nodes=1, seq_len=512, micro_batch_size=1, precision="amp_bf16"))
    two_nodes = estimate(make(num_gpus=16, num_nodes=2, seq_len=512, micro_batch_size=1, precision="amp_bf16"))
    assert one_node.comm.dp_bytes > 0
    assert two_nodes.comm.dp_time_s > one_node.comm.dp_time_s
    tp = estimate(make(num_gpus=8, tensor_parallel=8, seq_len=2048, micro_batch_size=1))
    assert tp.comm.tp_bytes > 0 and tp.t_comm_exposed_s > 0


def test_collectives_across_nodes_are_hierarchical():
    from perfmodel.analytic.comm import collective_time_s

    gb = 1e9
    one_node = make(num_gpus=8, num_nodes=1)
    a100 = one_node.gpu
    assert collective_time_s(one_node, gb, 8, 1) == pytest.approx(gb * 7 / 8 / (a100.intra_node_bandwidth_gb_per_s * 1e9))
    # 16 ranks over 2 nodes: 8 exchange over NVLink, then 2 nodes over the network, each GPU's NIC
    # carrying an eighth of the buffer
    two = make(num_gpus=16, num_nodes=2)
    expected = gb * 7 / 8 / (a100.intra_node_bandwidth_gb_per_s * 1e9) + gb * 1 / 2 / (8 * a100.inter_node_bandwidth_gb_per_s * 1e9)
    assert collective_time_s(two, gb, 16, 1) == pytest.approx(expected)
    # ranks 8 apart (one per node): everything over the network
    assert collective_time_s(two, gb, 2, 8) == pytest.approx(gb / 2 / (a100.inter_node_bandwidth_gb_per_s * 1e9))
    # a GB200 NVL72 rack: 64 GPUs on 16 trays are one NVLink domain
    rack = make(gpu="GB200", num_gpus=64, num_nodes=16, precision="bf16")
    assert collective_time_s(rack, gb, 64, 1) == pytest.approx(gb * 63 / 64 / (rack.gpu.intra_node_bandwidth_gb_per_s * 1e9))
    assert collective_time_s(one_node, gb, 1, 1) == 0.0


def test_context_parallel_splits_sequences_not_weights():
    base = {"model": "llama3-8b", "gpu": "H100-SXM", "seq_len": 32768, "micro_batch_size": 1, "precision": "bf16",
            "num_gpus": 16, "num_nodes": 2, "tensor_parallel": 8, "strategy": "zero1"}
    cp1, cp2 = make(**base), make(**base, context_parallel=2)
    assert (cp1.parallel.data_parallel, cp2.parallel.data_parallel) == (2, 1)
    assert cp2.parallel.shard_group == cp1.parallel.shard_group == 2
    m1, m2 = estimate_memory(cp1), estimate_memory(cp2)
    assert m2.weights_gb == pytest.approx(m1.weights_gb) and m2.optimizer_gb == pytest.approx(m1.optimizer_gb)
    assert m2.activations_gb == pytest.approx(m1.activations_gb / 2, rel=0.01)
    e1, e2 = estimate(cp1), estimate(cp2)
    assert e1.comm.cp_bytes == 0 < e2.comm.cp_bytes
    assert e2.comm.tp_bytes == pytest.approx(e1.comm.tp_bytes / 2)  # each rank all-reduces half the tokens
    # half the samples per step on the same GPUs: half the FLOPs per GPU
    assert e2.flops.hardware_flops_per_gpu == pytest.approx(e1.flops.hardware_flops_per_gpu / 2)
    from perfmodel.errors import ConfigError

    with pytest.raises(ConfigError, match="context_parallel"):
        make(**{**base, "num_gpus": 8, "num_nodes": 1}, context_parallel=2)


@pytest.mark.slow
def test_roofline_floor_stays_below_published_step_times():
    """The floor is a lower bound: real steps are slower. Checked on every public row (a few NCF
    rows, whose embedding traffic the model over-counts, are the known exceptions)."""
    pd = pytest.importorskip("pandas")
    from pathlib import Path

    from perfmodel.features import workload_from_row

    table = pd.read_parquet(Path(__file__).resolve().parents[1] / "datasets" / "features.parquet")
    public = table[(table["status"] == "ok") & (table["source_kind"] == "public")]
    below = [r["model_name"] for r in public.to_dict("records") if r["step_time_s"] < estimate(workload_from_row(r)).t_roofline_s]
    assert len(below) / len(public) < 0.01
    assert set(below) <= {"ncf", "llama3-70b"}


def test_pipeline_bubble_shrinks_with_more_micro_batches():
    few = estimate(make(num_gpus=4, pipeline_parallel=4, grad_accum_steps=4))
    many = estimate(make(num_gpus=4, pipeline_parallel=4, grad_accum_steps=32))
    assert few.pipeline_bubble == pytest.approx(1 + 3 / 4)
    assert many.pipeline_bubble == pytest.approx(1 + 3 / 32)


def test_unsupported_precision_is_a_clear_error():
    from perfmodel.errors import ConfigError

    with pytest.raises(ConfigError, match="no fp8 support"):
        make(precision="fp8")  # A100 has no fp8 tensor cores


def test_gbm_round_builds_histograms_at_lightgbms_own_measured_cost():
    """Hand-worked: 100,000 rows x 20 features, LightGBM's default 31 leaves (32): each cell is
    visited log2(32) / 2 = 2.5 times per round, at 6.5 thread-ns per visit (LightGBM's Higgs
    benchmark, conventions.GBM_SECONDS_PER_CELL_VISIT), on the 8 host threads assumed beside a
    GPU: 2e6 x 2.5 x 6.5e-9 / 8 = 4.06 ms, slower than the round's 3.6 MB of traffic at 10 GB/s
    (0.36 ms), which stays its floor. The step is one round, whatever the number of rounds."""
    from perfmodel.analytic.totals import plan_run

    def gbm(rounds: int) -> Workload:
        return Workload(
            model=ModelSpec(name="lightgbm", family="lightgbm", arch="gbm"),
            training=TrainingSpec(gbm_rows=100_000, gbm_features=20, gbm_rounds=rounds),
            gpu=get_gpu("A100-80GB"),
            parallel=ParallelSpec(),
        )

    est = estimate(gbm(300))
    assert est.t_bound_s == pytest.approx(2e6 * 2.5 * 6.5e-9 / 8)
    assert est.t_roofline_s == pytest.approx(3.6e6 / 10e9)
    assert estimate(gbm(12)).t_bound_s == est.t_bound_s
    assert est.samples_per_step == 100_000 and est.tokens_per_step is None
    assert plan_run(gbm(300), est).total_steps == 300
    # resident: 2.0 MB bins + 1.6 MB gradients + 20 x 256 x 16 B x 32 leaves = 2.62 MB histograms
    assert est.memory.activations_gb == pytest.approx((2.0e6 + 1.6e6 + 2_621_440) / 1e9)


def test_ddp_keeps_two_25_mib_gradient_buckets():
    """DDP's default bucket_cap_mb=25 (MiB), one bucket reducing while the next fills: 2 x 25 x 2^20
    bytes = 52.4 MB more than the same job on one GPU."""
    one = estimate_memory(make(precision="amp_bf16", seq_len=512, micro_batch_size=1))
    eight = estimate_memory(make(precision="amp_bf16", seq_len=512, micro_batch_size=1, num_gpus=8, strategy="ddp"))
    assert eight.temporary_gb - one.temporary_gb == pytest.approx(2 * 25 * 2**20 / 1e9)


# --- the terms small and unusual jobs need (numbers worked by hand from conventions' sources) ---


def _layer(d: int = 1000, f: int = 2000, arch: str = "encoder", vocab: int = 0, **train) -> Workload:
    """One transformer layer, 10 heads, on an A100-80GB (2,039 GB/s, 312 TFLOP/s bf16)."""
    spec = ModelSpec(name="one-layer", arch=arch, hidden_size=d, num_layers=1, num_heads=10, ffn_hidden_size=f, vocab_size=vocab)
    train.setdefault("seq_len", 100)
    train.setdefault("micro_batch_size", 1)
    train.setdefault("precision", "bf16")
    train.setdefault("tokens", 1e6)
    return Workload(model=spec, training=TrainingSpec(**train), gpu=get_gpu("A100-80GB"), parallel=ParallelSpec())


def test_elementwise_traffic_per_token_and_layer_from_the_op_census():
    """bf16, no LM head: (449 d + 36.6 f) bytes per token per layer; d=1000, f=2000, 100 tokens:
    (449,000 + 73,200) x 100 = 52.22 MB."""
    from perfmodel.analytic.traffic import step_traffic

    assert step_traffic(_layer()).nonmatmul_bytes == pytest.approx(52.22e6, rel=1e-3)
    # fp32 weights: (616 d + 73 f) x 100 = (616,000 + 146,000) x 100 = 76.2 MB
    assert step_traffic(_layer(precision="fp32")).nonmatmul_bytes == pytest.approx(76.2e6, rel=1e-3)


def test_loss_over_the_vocabulary_and_the_fused_cross_entropy_that_removes_it():
    """A decoder adds 70.4 bytes per token per vocabulary entry: 100 tokens x 32,000 x 70.4 =
    225.28 MB; a fused cross-entropy never materialises the logits."""
    from perfmodel.analytic.traffic import step_traffic

    plain = step_traffic(_layer()).nonmatmul_bytes
    decoder = step_traffic(_layer(arch="decoder", vocab=32000)).nonmatmul_bytes
    assert decoder - plain == pytest.approx(225.28e6, rel=1e-3)
    fused = step_traffic(_layer(arch="decoder", vocab=32000, fused_cross_entropy=True)).nonmatmul_bytes
    assert fused == pytest.approx(plain)
    big = {"arch": "decoder", "vocab": 32000, "seq_len": 2048, "micro_batch_size": 8}  # device-bound
    assert estimate(_layer(**big, fused_cross_entropy=True)).t_bound_s < estimate(_layer(**big)).t_bound_s


def test_autocast_recasts_every_matmul_weight_each_micro_batch():
    """amp: elementwise (632 d + 37 f) per token-layer plus 12 bytes per matmul weight:
    (632,000 + 74,000) x 100 = 70.6 MB, plus 12 x 8.002e6 weights (4 d^2 attention + 2 d f MLP
    + 2 d norm weights, which count_params keeps with the matmul weights) = 96.02 MB."""
    from perfmodel.analytic.traffic import step_traffic

    w = _layer(precision="amp_bf16")
    weights = count_params(w.model, w.training).matmul_active
    assert weights == pytest.approx(4 * 1000**2 + 2 * 1000 * 2000 + 2 * 1000)
    assert step_traffic(w).nonmatmul_bytes == pytest.approx(70.6e6 + 96.024e6, rel=1e-3)


def test_eager_attention_moves_and_keeps_the_scores():
    """Eager attention: 61.6 bytes per score; 10 heads x 100 keys x 100 queries = 100,000 scores:
    6.16 MB more traffic. Kept for backward: the fp32 softmax result and its bf16 copy, 6 bytes
    per score (0.6 MB), while SDPA's fp32 logsumexp (4 bytes per head per token: 10 x 100 x 4 =
    4 kB) is not kept: 0.596 MB more memory."""
    from perfmodel.analytic.traffic import step_traffic

    sdpa, eager = _layer(), _layer(attention_kernel="eager")
    assert step_traffic(eager).nonmatmul_bytes - step_traffic(sdpa).nonmatmul_bytes == pytest.approx(6.16e6, rel=1e-3)
    extra = sum(estimate_memory(eager).activations_by_kernel_gb.values()) - sum(estimate_memory(sdpa).activations_by_kernel_gb.values())
    assert extra == pytest.approx(0.596e-3, rel=1e-3)


def test_launches_bound_a_tiny_model():
    """A one-layer decoder with d = 80 at 8 tokens: every kernel of its step plan is tiny, so the
    micro-batch costs its launches (each >= the host's dispatch time), not its bytes or FLOPs; and
    torch.compile, which fuses the elementwise chains, launches fewer kernels and is faster."""
    from perfmodel.analytic import conventions as cv
    from perfmodel.analytic.step import plan_step

    w = _layer(d=80, f=160, seq_len=8, arch="decoder", vocab=1000)
    plan = plan_step(w)
    est = estimate(w)
    launches = plan.launches(per_step=False)
    assert est.launches_per_micro_batch == launches > 80
    assert est.t_bound_s >= launches * cv.HOST_SECONDS_PER_KERNEL
    floor = est.t_roofline_s
    assert est.t_bound_s > 50 * floor  # nowhere near its roofline
    compiled = _layer(d=80, f=160, seq_len=8, arch="decoder", vocab=1000, torch_compile=True)
    assert plan_step(compiled).launches(per_step=False) < 0.8 * launches
    assert estimate(compiled).t_bound_s < est.t_bound_s


def test_adamw_step_reads_and_writes_28_bytes_per_fp32_parameter():
    """AdamW on fp32 weights: read weight, grad, two moments (16 B), write weight and moments
    (12 B): 28 bytes per trainable parameter; all in bf16: 14."""
    from perfmodel.analytic.traffic import step_traffic

    fp32 = _layer(precision="fp32")
    n = count_params(fp32.model, fp32.training).trainable
    assert step_traffic(fp32).optimizer_bytes == pytest.approx(28 * n)
    assert step_traffic(_layer()).optimizer_bytes == pytest.approx(14 * n)


def test_qlora_dequantizes_before_every_use_so_it_is_slower_than_lora():
    """4-bit base: each pass reads 0.5 + 0.127/8 bytes and writes a 2-byte copy per weight; LoRA
    trains, so 2 passes per micro-batch: 2 x (0.5159 + 2) bytes per block weight."""
    from perfmodel.analytic.traffic import step_traffic

    qlora = make(seq_len=512, micro_batch_size=1, lora_r=16, quantization_bits=4)
    lora = make(seq_len=512, micro_batch_size=1, lora_r=16)
    blocks = count_params(qlora.model, qlora.training).blocks
    assert step_traffic(qlora).dequant_bytes == pytest.approx(2 * blocks * (0.5 + 0.127 / 8 + 2.0))
    assert step_traffic(lora).dequant_bytes == 0.0
    assert estimate(qlora).t_bound_s > estimate(lora).t_bound_s


def test_autocast_keeps_a_frozen_base_in_fp32():
    """LoRA under amp_bf16: the base model stays fp32 (4 bytes/param); cast to bf16 it is 2."""
    amp = estimate_memory(make(seq_len=512, micro_batch_size=1, lora_r=16, precision="amp_bf16"))
    half = estimate_memory(make(seq_len=512, micro_batch_size=1, lora_r=16, precision="bf16"))
    assert amp.weights_gb == pytest.approx(2 * half.weights_gb, rel=0.01)
    assert amp.weights_gb == pytest.approx(6.738 * 4, rel=0.02)


@pytest.mark.parametrize("seed", range(5))
def test_the_floor_is_never_above_the_analytic_step(seed):
    import random

    rng = random.Random(seed)
    for _ in range(40):
        w = make(
            seq_len=rng.choice([64, 512, 4096]),
            micro_batch_size=rng.choice([1, 4, 16]),
            grad_accum_steps=rng.choice([1, 8]),
            precision=rng.choice(["bf16", "amp_bf16", "fp32"]),
            activation_checkpointing=rng.random() < 0.5,
            lora_r=rng.choice([None, 8]),
            num_gpus=rng.choice([1, 8]),
            strategy=rng.choice(["ddp", "fsdp", "zero2"]),
        )
        est = estimate(w)
        assert 0 < est.t_roofline_s <= est.t_bound_s


def test_the_plans_that_leave_out_costs_say_so_in_the_features():
    """NCF's plan is its MLP tower (no embedding lookups), Transformer-XL's a GPT-style decoder: the
    feature plan_approximate tells the learned residual; a Llama's plan is its whole step."""
    from perfmodel.analytic.step import plan_is_approximate
    from perfmodel.catalog.models import get_model

    assert not plan_is_approximate(get_model("ncf"))  # its embedding lookups are costed since model 24
    assert not plan_is_approximate(get_model("llama2-7b"))
    assert plan_is_approximate(dataclasses.replace(get_model("gpt2-xl"), family="transformer-xl"))
