"""The row codec: workload -> feature-table row -> workload is the identity for every field the
cost model reads, through a real parquet round trip; rows missing a dimension the cost model
needs are refused by name and skipped by training with a counted reason."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from perfmodel.catalog import get_gpu, get_model, gpu_names
from perfmodel.codec import workload_from_row, workload_to_row
from perfmodel.errors import CatalogError, ConfigError, DataError
from perfmodel.schema import conform
from perfmodel.workload import (
    ARCHS,
    ATTENTION_KERNELS,
    FRAMEWORKS,
    OPTIMIZERS,
    PRECISIONS,
    STRATEGIES,
    ModelSpec,
    ParallelSpec,
    TrainingSpec,
    Workload,
)

# Fields a row does not carry, by the task's definition: the amount of data and whole-run terms
# (a row measures one step), descriptions of where numbers came from, and the price (cost, not
# time). Every other field of the three specs must survive the round trip; a field added to a
# spec later without a column makes this test fail.
NOT_COMPARED = {"model.source", "model.reference_input", "parallel.price_per_gpu_hour"} | {
    f"training.{name}" for name in ("tokens", "samples", "epochs", "steps", "eval_fraction")
}
TRANSFORMERS = ("decoder", "encoder", "encoder-decoder")
PROVENANCE = {
    "source": "test",
    "citation": "tests/test_codec.py",
    "source_kind": "public",
    "status": "ok",
    "benchmark_kind": "public_training",
    "step_time_s": 1.0,
}


def _maybe(rng: random.Random, value: Any) -> Any:
    return value if rng.random() < 0.6 else None


def random_model(rng: random.Random, i: int, arch: str) -> ModelSpec:
    if arch in TRANSFORMERS:
        heads = rng.choice([1, 2, 4, 12, 16, 32, 64])
        experts = rng.choice([1, 1, 8, 64])
        return ModelSpec(
            name=f"model-{i}",
            family=rng.choice(["llama", "gpt", "bert", "t5", "custom"]),
            arch=arch,
            hidden_size=heads * rng.choice([32, 64, 80, 128]),
            num_layers=rng.randint(1, 120),
            num_heads=heads,
            num_kv_heads=rng.choice([None, 1, heads]),
            head_dim=rng.choice([None, None, 64, 256]),
            ffn_hidden_size=_maybe(rng, rng.randint(1, 60_000)),
            vocab_size=rng.choice([None, 0, rng.randint(1, 260_000)]),
            gated_mlp=rng.random() < 0.5,
            tied_embeddings=rng.random() < 0.5,
            num_experts=experts,
            experts_per_token=rng.randint(1, min(experts, 8)),
            learned_pos_embeddings=rng.choice([0, 512, 1024, 2050]),
            params_total=_maybe(rng, rng.randint(10**6, 10**12)),
            source="random",
        )
    if arch == "gbm":
        return ModelSpec(name=f"gbm-{i}", family="lightgbm", arch="gbm")
    return ModelSpec(
        name=f"model-{i}",
        family=rng.choice(["resnet", "mlp", "custom"]),
        arch=arch,
        params_total=rng.randint(1_000, 10**10),
        forward_gflops_per_sample=rng.uniform(1e-3, 1e3),
        activation_mb_per_sample=_maybe(rng, rng.uniform(0.0, 1e4)),
        reference_input="224x224 image",
        **(_part(rng) if rng.random() < 0.3 else {}),
    )


def _part(rng: random.Random) -> dict:
    """A transformer part inside the model (a Ludwig FT-Transformer / transformer encoder)."""
    heads = rng.choice([1, 4, 8])
    return {
        "part_layers": rng.randint(1, 6),
        "part_tokens": rng.randint(2, 512),
        "part_hidden_size": heads * rng.choice([16, 32, 64]),
        "part_num_heads": heads,
        "part_ffn_size": rng.choice([64, 256, 1024]),
        "part_inputs": rng.choice([0, rng.randint(1, 60)]),
        "part_input_width": rng.choice([0.0, rng.uniform(1.0, 64.0)]),
        "part_vocab_size": rng.choice([0, rng.randint(10, 30_000)]),
    }


def random_training(rng: random.Random, arch: str, precisions: list[str]) -> TrainingSpec:
    gbm = arch == "gbm"
    return TrainingSpec(
        seq_len=rng.randint(1, 131_072),
        micro_batch_size=rng.randint(1, 4096),
        grad_accum_steps=rng.randint(1, 64),
        precision=rng.choice(precisions),
        optimizer=rng.choice(OPTIMIZERS),
        activation_checkpointing=rng.random() < 0.5,
        lora_r=_maybe(rng, rng.choice([4, 8, 16, 64, 256])),
        lora_target_modules=rng.randint(1, 7),
        quantization_bits=rng.choice([None, 4, 8]),
        fused_cross_entropy=rng.random() < 0.5,
        attention_kernel=rng.choice(ATTENTION_KERNELS),
        torch_compile=rng.random() < 0.5,
        trainable_fraction=_maybe(rng, rng.random()),
        tokens=_maybe(rng, 1e9),
        steps=rng.choice([None, 1000]),
        eval_fraction=rng.choice([0.0, 0.1]),
        gbm_rows=rng.randint(1, 10**8) if gbm else _maybe(rng, rng.randint(1, 10**6)),
        gbm_features=rng.randint(1, 5000) if gbm else None,
        gbm_rounds=_maybe(rng, rng.randint(1, 10_000)),
    )


def random_parallel(rng: random.Random) -> ParallelSpec:
    tp, pp, cp = rng.choice([1, 2, 8]), rng.choice([1, 1, 4]), rng.choice([1, 1, 2])
    num_gpus = tp * pp * cp * rng.choice([1, 2, 3, 8, 64])
    return ParallelSpec(
        num_gpus=num_gpus,
        num_nodes=rng.choice([d for d in (1, 2, 3, 4, 8, 16) if num_gpus % d == 0]),
        strategy=rng.choice(STRATEGIES),
        tensor_parallel=tp,
        pipeline_parallel=pp,
        context_parallel=cp,
        cpu_offload=rng.random() < 0.5,
        price_per_gpu_hour=_maybe(rng, 2.5),
    )


def random_workloads(n: int, seed: int) -> list[Workload]:
    rng = random.Random(seed)
    gpus = [get_gpu(name) for name in gpu_names()]
    out: list[Workload] = []
    for i in range(n):
        gpu = rng.choice(gpus)
        arch = ARCHS[i % len(ARCHS)]  # every architecture, in turn
        precisions = [p for p in PRECISIONS if gpu.supports(TrainingSpec(precision=p).compute_dtype)]
        out.append(
            Workload(
                model=random_model(rng, i, arch),
                training=random_training(rng, arch, precisions or list(PRECISIONS)),
                gpu=gpu,
                parallel=random_parallel(rng),
                framework=rng.choice([*FRAMEWORKS, "maxtext"]),
            )
        )
    return out


def assert_same_workload(back: Workload, w: Workload) -> None:
    for section in ("model", "training", "parallel"):
        spec, spec_back = getattr(w, section), getattr(back, section)
        for f in dataclasses.fields(spec):
            if f"{section}.{f.name}" in NOT_COMPARED:
                continue
            a, b = getattr(spec, f.name), getattr(spec_back, f.name)
            assert (type(b), b) == (type(a), a), f"{section}.{f.name}: {a!r} came back as {b!r}"
    assert back.gpu.name == w.gpu.name
    assert back.framework == w.framework


def test_round_trip_through_a_parquet_file_is_the_identity(tmp_path: Path) -> None:
    workloads = random_workloads(350, seed=20240611)
    rows = [workload_to_row(w, row_id=f"r{i}", **PROVENANCE) for i, w in enumerate(workloads)]
    path = tmp_path / "rows.parquet"
    conform(pd.DataFrame(rows)).to_parquet(path, index=False)
    records = pd.read_parquet(path).to_dict("records")
    assert len(records) == len(workloads)
    for w, record in zip(workloads, records, strict=True):
        assert_same_workload(workload_from_row(record), w)


def test_round_trip_of_a_catalog_workload_keeps_its_model() -> None:
    w = Workload(
        model=get_model("llama3-8b"),
        training=TrainingSpec(seq_len=8192, micro_batch_size=2, precision="amp_bf16", lora_r=16),
        gpu=get_gpu("H100-SXM"),
        parallel=ParallelSpec(num_gpus=8, strategy="fsdp"),
        framework="torchtitan",
    )
    row = workload_to_row(w)
    assert row["global_batch_size"] == 16  # 2 samples x 8 data-parallel GPUs
    assert_same_workload(workload_from_row(row), w)


def _llama_row(**values: Any) -> dict[str, Any]:
    w = Workload(
        model=get_model("llama2-7b"),
        training=TrainingSpec(seq_len=4096, micro_batch_size=1, precision="amp_bf16"),
        gpu=get_gpu("A100-80GB"),
        parallel=ParallelSpec(num_gpus=8, strategy="fsdp"),
    )
    return {**workload_to_row(w, **PROVENANCE, row_id="llama"), **values}


@pytest.mark.parametrize(
    ("blank", "arch"),
    [
        ("seq_len", "decoder"),
        ("num_heads", "decoder"),
        ("precision", "decoder"),
        ("forward_gflops_per_sample", "cnn"),
    ],
)
def test_a_row_missing_what_the_cost_model_needs_is_refused_by_name(blank: str, arch: str) -> None:
    values: dict[str, Any] = {"arch": arch, "params_total": 25e6, "forward_gflops_per_sample": 4.1}
    row = _llama_row(**{**values, blank: None})
    with pytest.raises(DataError, match=f"'{blank}'"):
        workload_from_row(row)


def test_training_skips_transformer_rows_without_seq_len_and_counts_them() -> None:
    from perfmodel.features import rows_to_training_data

    rows = [_llama_row(row_id=f"r{i}") for i in range(5)]
    for i in (1, 3):
        rows[i]["seq_len"] = None
    X, y, kept, skipped = rows_to_training_data(conform(pd.DataFrame(rows)))
    assert len(X) == len(y) == 3
    assert sorted(kept["row_id"]) == ["r0", "r2", "r4"]
    assert skipped == {"DataError: a decoder row needs 'seq_len' and it is empty": 2}


def test_empty_settings_take_the_config_defaults_and_nodes_come_from_the_catalog() -> None:
    row = _llama_row(
        num_gpus=16,
        num_nodes=None,
        strategy=None,
        optimizer=float("nan"),
        grad_accum_steps=pd.NA,
        framework=None,
        attention_kernel=None,
    )
    w = workload_from_row(row)
    assert w.parallel.num_nodes == 2  # 16 A100 SXM in 8-GPU HGX servers
    defaults_t, defaults_p = TrainingSpec(), ParallelSpec()
    assert (w.parallel.strategy, w.training.optimizer) == (defaults_p.strategy, defaults_t.optimizer)
    assert (w.training.grad_accum_steps, w.training.attention_kernel) == (1, defaults_t.attention_kernel)
    assert w.framework == Workload.__dataclass_fields__["framework"].default


def test_values_out_of_range_or_of_the_wrong_kind_are_errors() -> None:
    with pytest.raises(ConfigError):
        workload_from_row(_llama_row(micro_batch_size=0))
    with pytest.raises(DataError, match="whole number"):
        workload_from_row(_llama_row(num_layers=31.5))
    with pytest.raises(DataError, match="true or false"):
        workload_from_row(_llama_row(gated_mlp="maybe"))
    assert workload_from_row(_llama_row(gated_mlp="False")).model.gated_mlp is False


def test_own_cpu_rows_are_rebuilt_with_the_host_that_measured_them() -> None:
    cpu_row = _llama_row(gpu="cpu", num_gpus=1, precision="fp32", hardware_id="no-such-host")
    with pytest.raises(CatalogError, match="no-such-host"):
        workload_from_row({**cpu_row, "source_kind": "own"})
    assert workload_from_row({**cpu_row, "source_kind": "public"}).gpu.vendor == "cpu"


def test_to_row_names_only_schema_columns_and_defaults_run_group() -> None:
    w = workload_from_row(_llama_row())
    assert workload_to_row(w, row_id="abc")["run_group"] == "abc"
    assert workload_to_row(w, row_id="abc", run_group="run-1")["run_group"] == "run-1"
    with pytest.raises(DataError, match="stepTime"):
        workload_to_row(w, stepTime=1.0)


def test_a_row_of_a_catalog_model_trains_with_the_catalogs_dropout_and_a_prediction_agrees():
    from perfmodel.codec import catalog_dropout, recorded

    def _workload(model):  # type: ignore[no-untyped-def]
        return Workload(model=model, training=TrainingSpec(seq_len=1024, micro_batch_size=2, precision="fp32"),
                        gpu=get_gpu("H100-SXM"), parallel=ParallelSpec(num_gpus=1))  # fmt: skip

    gpt2 = get_model("gpt2-large")
    assert gpt2.dropout == 0.1 and catalog_dropout(gpt2) == 0.1
    w = workload_from_row(workload_to_row(_workload(model=gpt2)))
    assert w.model.dropout == 0.1  # the feature table does not record dropout: the catalog's
    other = dataclasses.replace(gpt2, num_layers=12)  # another shape under the same name: not the catalog's
    assert catalog_dropout(other) == 0.0
    assert recorded(_workload(model=dataclasses.replace(gpt2, dropout=0.0))).model.dropout == 0.1
    assert catalog_dropout(get_model("llama2-7b")) == 0.0
