"""Public-table importers: unit parsing, step-time derivations and skip reasons on hand-written
fixture rows in each source's own column format, plus checks on the committed parquet files."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from collectors.public import _common as common
from collectors.public.bigscience import import_bigscience_bloom176b_throughput
from collectors.public.dgxc import import_nvidia_dgxc_benchmarking_step_times
from collectors.public.lambda_labs import import_lambda_deeplearning_benchmark_pytorch
from collectors.public.megatron_lm import _flops_2021, import_megatron_lm_readme_scaling
from collectors.public.ml_engineering import read_mamf_matmul
from collectors.public.mosaicml import (
    import_mosaicml_examples_mosaicgpt_benchmarks,
    import_mosaicml_llm_foundry_branch_experiments,
    import_mosaicml_llm_foundry_mpt_benchmarks,
)
from collectors.public.nemo import (
    import_nvidia_nemo_automodel_perf_summary,
    import_nvidia_nemo_megatron_bridge_perf_summary,
)
from collectors.public.neusight import import_neusight_measured_e2e_latency
from collectors.public.not_per_step import import_mlperf_training_results_runs
from collectors.public.torchtitan import import_torchtitan_benchmarks
from perfmodel.schema import COLUMN_NAMES, REQUIRED, conform

REPO = Path(__file__).resolve().parents[1]
PUBLIC = REPO / "datasets" / "public"

H_MPT = (
    "source,readme_first_commit,readme_first_date,readme_last_commit,readme_last_date,in_latest_readme,table_section,model,"
    "params,config_n_layers,config_d_model,config_n_heads,seq_len,gpu,n_gpus,precision,mp_mode,parallelism,sharding_strategy,"
    "activation_checkpointing,activation_cpu_offload,micro_batch_size,grad_accum,global_batch_size,global_batch_size_tokens,"
    "samples_per_sec_total,tokens_per_sec_total,tokens_per_sec_per_gpu,mfu,hfu,model_tflop_per_gpu,notes"
)
H_GPT = (
    "source,table_section,first_commit,first_date,last_commit,last_date,readme_has_out_of_date_warning,model,params,seq_len,"
    "gpu_config,gpu,n_gpus,precision,mp_mode,sharding_strategy,activation_checkpointing,activation_cpu_offload,micro_batch_size,"
    "grad_accum,global_batch_size,global_batch_size_tokens,samples_per_sec_total,tokens_per_sec_total,tokens_per_sec_per_gpu,"
    "mfu_star_no_attn,mfu,hfu_star_no_attn,hfu,model_tflop_per_gpu,notes"
)
H_BRANCH = (
    "source,source_path,source_commit,source_date,section,in_main_readme,model,params,seq_len,gpu,n_gpus,precision,mp_mode,"
    "parallelism,sharding_strategy,activation_checkpointing,activation_cpu_offload,micro_batch_size,grad_accum,"
    "global_batch_size,global_batch_size_tokens,samples_per_sec_total,tokens_per_sec_total,tokens_per_sec_per_gpu,mfu,hfu,"
    "model_tflop_per_gpu,docker_image,compile_config,draft_extra_value,suspect,also_seen_in,notes"
)
H_LAMBDA = (
    "source,table_version,first_commit,first_date,last_commit,last_date,in_head,config_name,num_gpu,watt,price,precision,"
    "model,throughput_total,throughput_metric,batch_size_per_gpu,notes"
)
H_NEUSIGHT = (
    "source,gpu,model,model_arch,config_n_layers,config_d_model,config_n_heads,mode,seq_len,batch_size,option,n_gpus,"
    "parallelism,precision,json_num_layer,e2e_latency_ms,fw_latency_ms,bwall_latency_ms,notes"
)
H_NEMO = (
    "repo,path,first_commit,first_date,last_commit,last_date,in_latest,release,section,system,model,task,precision,variant,"
    "n_gpus,global_batch_size,micro_batch_size,seq_len,seq_len_k,fsdp,tp,pp,cp,vp,ep,etp,dp,grad_accum,tokens_per_sec_per_gpu,"
    "model_tflops_per_gpu,published_est_days_10T_tokens_1K_gpus,published_est_mins_finetune_10M_tokens,context,raw_row"
)
H_AUTO = (
    "repo,path,first_commit,first_date,last_commit,last_date,in_latest,section,system,precision,model,workload,n_gpus,"
    "global_batch_size,micro_batch_size,local_batch_size,grad_accum,seq_len,tp,pp,cp,ep,vp,fsdp,dp,kernel_optimizations,"
    "step_time_s,model_tflops_per_gpu,tokens_per_sec_per_gpu,mfu,notes"
)
H_DGXC = (
    "source_repo,readme_path,refs,in_main,blob,section,table_title,column_header,gpu,n_gpus,precision,title_config,"
    "nemo_container_in_title,global_batch_size,layers,pp,vp,step_time_s,tokens_per_sec_total,mfu,published_days_to_train_1T_tokens"
)
H_DGXC_CFG = (
    "readme_path,refs,in_main,section,col_CG,col_CP,col_DP,col_Dataset,col_Datatype,col_EP,col_ETP,col_FSDP,col_GA,col_GBS,"
    "col_GPT_OSS_Model_Size,col_GPUs,col_Layers,col_Llama3_1_Model_Size,col_MBS,col_Model_Size,col_OL,col_PP,col_Precision,"
    "col_RL,col_RecomputeModule,col_SeqLen,col_Size,col_Steps,col_TP,col_VP"
)
H_TITAN = (
    "source,table,model,gpu,n_gpus,derived_n_gpus,precision,parallelism,techniques,seq_len,seq_len_note,local_batch_size,"
    "global_batch_size,activation_checkpointing,tokens_per_sec_per_gpu,mfu,memory_gib,tokens_trained,notes"
)
H_BLOOM = (
    "source,line,section,table_index,tflops_formula,context,header,raw_row,mismatch,col_DP,col_GBS,col_GPUs,col_Layers,"
    "col_MBS,col_Mem,col_NHEADS,col_NHIDDEN,col_Nodes,col_Notes,col_PP,col_Sec_per_it,col_Size,col_TFLOPs,col_TP,col_ZS,"
    "col_async,notes"
)


def write(folder: Path, stem: str, header: str, rows: list[dict]) -> Path:
    """A fixture CSV in the source's column format (unlisted cells empty)."""
    path = folder / f"{stem}.csv"
    pd.DataFrame(rows, columns=header.split(","), dtype=object).fillna("").to_csv(path, index=False)
    return path


def check_schema(frame: pd.DataFrame) -> None:
    assert list(frame.columns) == list(COLUMN_NAMES)
    conform(frame)  # raises on a missing required value
    assert frame["citation"].str.len().gt(0).all()
    assert frame["step_time_s"].gt(0).all()


# --- value parsing --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cell", "value"),
    [
        ("30,040", 30040.0),
        ("1.3M", 1.3e6),
        ("200M", 2e8),
        ("~32", 32.0),
        ("[842]", 842.0),
        ("110.95 GiB (60.2%)", 110.95),
        ("OOM", None),
        ("n/a", None),
        ("", None),
        ("-1", -1.0),
    ],
)
def test_parse_number(cell: str, value: float | None) -> None:
    assert common.parse_number(cell) == value


def test_parse_percent_seq_len_int() -> None:
    assert common.parse_percent("61.1%") == pytest.approx(0.611)
    assert common.parse_percent("53.33") == pytest.approx(0.5333)
    assert common.parse_seq_len("8K") == 8192 and common.parse_seq_len("2048") == 2048
    assert (
        common.parse_int("1,024") == 1024 and common.parse_int("8.0") == 8 and common.parse_int("8.5") is None
    )


# --- MosaicML ----------------------------------------------------------------------------------

MPT_ROW = {
    "source": "mosaicml/llm-foundry:scripts/train/benchmarking/README.md",
    "readme_first_commit": "a" * 40,
    "readme_first_date": "2023-05-03",
    "readme_last_commit": "b" * 40,
    "readme_last_date": "2024-04-22",
    "in_latest_readme": "True",
    "table_section": "A100 80GB",
    "model": "70b",
    "params": "64862437376",
    "config_n_layers": "80",
    "config_d_model": "8192",
    "config_n_heads": "64",
    "seq_len": "2048",
    "gpu": "a100_80gb",
    "n_gpus": "64",
    "precision": "bf16",
    "mp_mode": "PURE",
    "sharding_strategy": "FULL_SHARD",
    "activation_checkpointing": "True",
    "activation_cpu_offload": "False",
    "micro_batch_size": "8",
    "grad_accum": "4",
    "global_batch_size": "2048",
    "global_batch_size_tokens": "4194304",
    "samples_per_sec_total": "12",
    "tokens_per_sec_total": "26274",
    "mfu": "53.33",
}


def test_mosaicml_mpt(tmp_path: Path) -> None:
    rows = [
        MPT_ROW,
        {
            **MPT_ROW,
            "model": "7b",
            "config_n_layers": "32",
            "config_d_model": "4096",
            "config_n_heads": "32",
            "gpu": "h100_80gb",
            "precision": "amp_fp8",
            "sharding_strategy": "SHARD_GRAD_OP",
            "n_gpus": "8",
            "micro_batch_size": "8",
            "grad_accum": "1",
            "global_batch_size": "64",
            "tokens_per_sec_total": "131072",
        },
        {**MPT_ROW, "gpu": "tpu_v4"},
    ]
    result = import_mosaicml_llm_foundry_mpt_benchmarks(
        write(tmp_path, "mosaicml_llm_foundry_mpt_benchmarks", H_MPT, rows)
    )
    check_schema(result.rows)
    assert len(result.rows) == 2 and result.skipped == {"gpu not in catalog: tpu_v4": 1}
    first = result.rows.set_index("model_name").loc["mpt-70b"]
    assert first["step_time_s"] == pytest.approx(4194304 / 26274)
    assert first["reported_mfu"] == pytest.approx(0.5333)
    assert (first["gpu"], first["precision"], first["strategy"], first["framework"]) == (
        "A100-80GB",
        "amp_bf16",
        "fsdp",
        "composer-fsdp",
    )
    assert first["citation"].startswith(
        "mosaicml/llm-foundry@" + "b" * 40 + ":scripts/train/benchmarking/README.md"
    )
    fp8 = result.rows.set_index("model_name").loc["mpt-7b"]
    assert (fp8["gpu"], fp8["precision"], fp8["strategy"]) == ("H100-SXM", "fp8", "zero2")
    assert fp8["step_time_s"] == pytest.approx(64 * 2048 / 131072)
    assert (first["num_nodes"], fp8["num_nodes"]) == (8, 1)  # 64 and 8 GPUs in 8-GPU servers
    rows = result.rows
    assert set(rows["source"]) == {"mosaicml_llm_foundry_mpt_benchmarks"}
    assert set(rows["source_kind"]) == {"public"} and set(rows["benchmark_kind"]) == {"public_training"}
    assert set(rows["status"]) == {"ok"} and rows["collector_version"].str.endswith("public import").all()
    assert (rows["run_group"] == rows["row_id"]).all()  # each configuration measured once: runs of one row


def test_mosaicgpt_dedupes_against_foundry_and_checks_params(tmp_path: Path) -> None:
    write(tmp_path, "mosaicml_llm_foundry_mpt_benchmarks", H_MPT, [MPT_ROW])
    base = {
        k: MPT_ROW[k]
        for k in (
            "seq_len",
            "gpu",
            "n_gpus",
            "precision",
            "mp_mode",
            "sharding_strategy",
            "activation_checkpointing",
            "activation_cpu_offload",
            "micro_batch_size",
            "grad_accum",
            "global_batch_size",
            "global_batch_size_tokens",
        )
    }
    base.update(
        source="mosaicml/examples:llm/throughput/README.md",
        table_section="A100 80GB",
        first_commit="c" * 40,
        first_date="2023-02-13",
        last_commit="d" * 40,
        last_date="2023-04-02",
        readme_has_out_of_date_warning="False",
    )
    rows = [
        {
            **base,
            "model": "gpt70b",
            "params": "64861528064",
            "tokens_per_sec_total": "26274.2",
            "mfu": "0.4265",
        },  # = foundry row
        {
            **base,
            "model": "gpt7b",
            "params": "6658859008",
            "n_gpus": "8",
            "micro_batch_size": "12",
            "grad_accum": "22",
            "global_batch_size": "2048",
            "tokens_per_sec_total": "14527",
            "mfu": "0.41",
        },  # partial last micro-batch
        {
            **base,
            "model": "gpt7b",
            "params": "9999999999",
            "n_gpus": "16",
            "tokens_per_sec_total": "1000",
            "global_batch_size": "512",
            "micro_batch_size": "8",
            "grad_accum": "4",
        },  # params do not match the MPT dims
    ]
    result = import_mosaicml_examples_mosaicgpt_benchmarks(
        write(tmp_path, "mosaicml_examples_mosaicgpt_benchmarks", H_GPT, rows)
    )
    check_schema(result.rows)
    assert result.skipped == {
        "same measurement as an llm-foundry README row": 1,
        "model dims not confirmed by the table's parameter count": 1,
    }
    row = result.rows.iloc[0]
    assert (row["model_name"], row["hidden_size"], row["grad_accum_steps"]) == ("mpt-7b", 4096, 22)
    assert row["reported_mfu"] == pytest.approx(0.41)  # early tables: MFU already a fraction
    assert row["step_time_s"] == pytest.approx(2048 * 2048 / 14527)


def test_branch_experiments_skip_suspect_and_keep_repeats(tmp_path: Path) -> None:
    base = {
        k: MPT_ROW[k]
        for k in (
            "seq_len",
            "gpu",
            "precision",
            "mp_mode",
            "sharding_strategy",
            "activation_checkpointing",
            "activation_cpu_offload",
            "global_batch_size_tokens",
        )
    }
    base.update(
        source="mosaicml/llm-foundry (unmerged branch/PR commit)",
        source_commit="e" * 40,
        source_date="2023-10-03",
        model="1b",
        params="1315950592",
        n_gpus="8",
        micro_batch_size="8",
        grad_accum="8",
        global_batch_size="512",
    )
    rows = [
        {
            **base,
            "source_path": "scripts/train/benchmarking/h100.csv",
            "tokens_per_sec_total": "154114",
            "mfu": "28.1",
        },
        {
            **base,
            "source_path": "scripts/train/benchmarking/README.md",
            "tokens_per_sec_total": "154114",
            "mfu": "56.21",
        },
        {
            **base,
            "source_path": "scripts/train/benchmarking/README.md",
            "tokens_per_sec_total": "153151",
            "mfu": "55.86",
        },
        {
            **base,
            "source_path": "scripts/train/benchmarking/torch2.csv",
            "tokens_per_sec_total": "999999",
            "mfu": "160",
            "suspect": "MFU>100% (inconsistent with throughput; likely collection bug)",
        },
    ]
    result = import_mosaicml_llm_foundry_branch_experiments(
        write(tmp_path, "mosaicml_llm_foundry_branch_experiments", H_BRANCH, rows)
    )
    check_schema(result.rows)
    assert result.skipped == {
        "flagged suspect in the source (MFU > 100 %)": 1,
        "same measurement copied into several sweep files": 1,
    }
    assert sorted(result.rows["repeat_index"].tolist()) == [0, 1]
    assert sorted(result.rows["reported_mfu"].round(4).tolist()) == [0.5586, 0.5621]  # the README copy wins
    # two measurements of one configuration: one run, so CV keeps them together
    assert result.rows["run_group"].nunique() == 1 and result.rows["row_id"].nunique() == 2


# --- Lambda -----------------------------------------------------------------------------------

LAMBDA = {
    "source": "lambdal/deeplearning-benchmark:pytorch/pytorch-train-throughput-fp32.csv",
    "table_version": "v1",
    "first_commit": "f" * 40,
    "first_date": "2022-11-19",
    "last_commit": "0" * 40,
    "last_date": "2024-10-07",
    "in_head": "True",
    "num_gpu": "1.0",
    "throughput_metric": "images/sec",
}


def test_lambda(tmp_path: Path) -> None:
    rows = [
        {
            **LAMBDA,
            "config_name": "8x A100 80GB SXM4",
            "num_gpu": "8.0",
            "precision": "fp32",
            "model": "resnet50",
            "throughput_total": "12000.0",
            "batch_size_per_gpu": "5120",
        },
        {
            **LAMBDA,
            "config_name": "8x A100 80GB SXM4",
            "num_gpu": "8.0",
            "precision": "fp32",
            "model": "resnet50",
            "throughput_total": "11000.0",
            "batch_size_per_gpu": "5120",
            "in_head": "False",
            "last_date": "2023-01-01",
        },
        {
            **LAMBDA,
            "config_name": "LambdaCloud V100 16GB",
            "precision": "fp32",
            "model": "bert_large_squad",
            "throughput_total": "12.0",
            "batch_size_per_gpu": "8",
        },
        {
            **LAMBDA,
            "config_name": "RTX 3090",
            "precision": "fp16 (AMP/mixed)",
            "model": "transformerxlbase",
            "throughput_total": "48000.0",
            "batch_size_per_gpu": "24",
        },
        {
            **LAMBDA,
            "config_name": "RTX 3090",
            "precision": "fp16 (AMP/mixed)",
            "model": "ssd",
            "throughput_total": "-1",
            "batch_size_per_gpu": "140",
        },
        {
            **LAMBDA,
            "config_name": "RTX 3090",
            "precision": "fp16 (AMP/mixed)",
            "model": "gnmt",
            "throughput_total": "9.0",
            "batch_size_per_gpu": "464",
        },
        {
            **LAMBDA,
            "config_name": "ASUS_8xH200_140GB_SXM_lambda-scalar_v2",
            "table_version": "v2",
            "num_gpu": "",
            "precision": "fp32",
            "model": "resnet50",
            "throughput_total": "16643.0",
            "batch_size_per_gpu": "",
        },
        {
            **LAMBDA,
            "config_name": "RTX A5500",
            "precision": "fp32",
            "model": "resnet50",
            "throughput_total": "400.0",
            "batch_size_per_gpu": "256",
        },
    ]
    result = import_lambda_deeplearning_benchmark_pytorch(
        write(tmp_path, "lambda_deeplearning_benchmark_pytorch", H_LAMBDA, rows)
    )
    check_schema(result.rows)
    assert result.skipped == {
        "superseded by a later value of the same system/task in the same table": 1,
        "throughput -1 (not run or failed)": 1,
        "gnmt: tokens/s with a batch in sentences (no per-step meaning)": 1,
        "no batch size (v2 tables have no batch-size CSV)": 1,
        "gpu not in catalog: RTX A5500": 1,
    }
    by = result.rows.set_index("model_name")
    rn = by.loc["resnet50"]  # the batch column is the global batch (Lambda's compile script)
    assert (rn["gpu"], rn["num_gpus"], rn["global_batch_size"], rn["micro_batch_size"]) == (
        "A100-80GB",
        8,
        5120,
        640,
    )
    assert rn["precision"] == "tf32" and rn["step_time_s"] == pytest.approx(5120 / 12000)
    bert = by.loc["bert-large"]
    assert (bert["gpu"], bert["precision"], bert["seq_len"]) == ("V100-16GB", "fp32", 384)
    txl = by.loc["transformer-xl-base"]
    # --fp16 runs Transformer-XL under apex amp O2 (train.py defaults): the model in fp16, not autocast;
    # BERT and Transformer-XL compute attention on the math path, ResNet has none
    assert txl["precision"] == "fp16" and txl["step_time_s"] == pytest.approx(24 * 192 / 48000)
    assert "O2" in txl["notes"] and (txl["attention_kernel"], bert["attention_kernel"]) == ("eager", "eager")
    assert pd.isna(rn["attention_kernel"])
    assert txl["framework"] == "dle-ngc"
    # Lambda runs it without --adaptive: a full softmax over WikiText-103's 267,735 words through the
    # tied embedding, 191,948,759 parameters (the run's log: n_token, n_all_param, adaptive=False)
    assert (txl["vocab_size"], bool(txl["tied_embeddings"]), txl["params_total"]) == (267_735, True, 191_948_759)
    assert "adaptive=False" in txl["notes"]
    # what NVIDIA's scripts step with under Lambda's flags: ConvNets main.py's default SGD with
    # momentum 0.9, run_squad.py's Adam with decoupled weight decay, Transformer-XL base's jitlamb (LAMB:
    # not in the catalog, unset), channels_last unset, i.e. off (main.py's default --memory-format nchw)
    assert (rn["optimizer"], bert["optimizer"]) == ("sgd_momentum", "adamw") and pd.isna(txl["optimizer"])
    assert pd.isna(rn["channels_last"]) or not rn["channels_last"]


def test_lambda_drops_rows_faster_per_gpu_than_data_parallelism_allows(tmp_path: Path) -> None:
    def ncf(config: str, n: int, total: float) -> dict[str, str]:
        return {
            **LAMBDA,
            "config_name": config,
            "num_gpu": f"{n}.0",
            "precision": "fp32",
            "model": "ncf",
            "throughput_total": str(total),
            "batch_size_per_gpu": str(1_000_000 * n),
        }

    rows = [
        ncf("H100 80GB SXM5", 1, 6.6e7),
        ncf("2x H100 80GB SXM5", 2, 1.3e8),
        ncf("4x H100 80GB SXM5", 4, 2.6e8),
        ncf("8x H100 80GB SXM5", 8, 8 * 2.1e9),
    ]  # the last: 2.1 billion samples/s per GPU
    result = import_lambda_deeplearning_benchmark_pytorch(
        write(tmp_path, "lambda_deeplearning_benchmark_pytorch", H_LAMBDA, rows)
    )
    assert sorted(result.rows["num_gpus"].tolist()) == [1, 2, 4]
    reason = "implausible: per-GPU throughput > 4x that of the same task, GPU and precision on fewer GPUs"
    assert result.skipped == {reason: 1}
    # Slow multi-GPU rows do not make a fast single-GPU row implausible.
    slow = [
        ncf("RTX 2080Ti", 1, 23.0),
        ncf("2x RTX 2080Ti", 2, 6.0),
        ncf("4x RTX 2080Ti", 4, 6.0),
        ncf("8x RTX 2080Ti", 8, 6.0),
    ]
    result = import_lambda_deeplearning_benchmark_pytorch(
        write(tmp_path, "lambda_deeplearning_benchmark_pytorch", H_LAMBDA, slow)
    )
    assert len(result.rows) == 4 and not result.skipped


# --- NeuSight ---------------------------------------------------------------------------------


def test_neusight(tmp_path: Path) -> None:
    base = {
        "source": "sitar-lab/NeuSight@6945927d:scripts/asplos/label/x.json",
        "model": "gpt2_large",
        "config_n_layers": "36",
        "config_d_model": "1280",
        "config_n_heads": "20",
        "seq_len": "1024",
        "n_gpus": "1",
        "precision": "fp32",
        "parallelism": "single GPU",
        "notes": "e2e = fw + bw",
    }
    rows = [
        {**base, "gpu": "NVIDIA_L4", "mode": "train", "batch_size": "1", "e2e_latency_ms": "967.44"},
        {
            **base,
            "gpu": "NVIDIA_H100_80GB_HBM3",
            "mode": "train",
            "batch_size": "16",
            "option": "dp4",
            "n_gpus": "4",
            "e2e_latency_ms": "642.08",
        },
        {**base, "gpu": "NVIDIA_L4", "mode": "inf", "batch_size": "1", "e2e_latency_ms": "300"},
        {
            **base,
            "gpu": "NVIDIA_L4",
            "model": "switchxl4",
            "mode": "train",
            "batch_size": "1",
            "e2e_latency_ms": "300",
        },
    ]
    result = import_neusight_measured_e2e_latency(
        write(tmp_path, "neusight_measured_e2e_latency", H_NEUSIGHT, rows)
    )
    check_schema(result.rows)
    assert result.skipped == {"inference row": 1, "model without a catalog entry: switchxl4": 1}
    single, dp4 = result.rows.sort_values("num_gpus").to_dict("records")
    assert single["step_time_s"] == pytest.approx(0.96744) and single["includes_optimizer_step"] is False
    assert (single["gpu"], single["precision"], single["framework"], single["optimizer"]) == (
        "L4",
        "fp32",
        "hf-eager",
        "none",
    )
    assert (dp4["micro_batch_size"], dp4["global_batch_size"], dp4["strategy"]) == (4, 16, "ddp")


# --- NeMo -------------------------------------------------------------------------------------

NEMO = {
    "repo": "NVIDIA-NeMo/Megatron-Bridge",
    "path": "docs/performance-summary.md",
    "first_commit": "1" * 40,
    "first_date": "2026-02-25",
    "last_commit": "2" * 40,
    "last_date": "2026-02-25",
    "in_latest": "True",
    "release": "NeMo 26.02",
    "section": "Pre-Training Performance",
    "system": "DGX-B200",
    "model": "LLAMA3_70B",
    "n_gpus": "64",
    "global_batch_size": "128",
    "micro_batch_size": "1",
    "seq_len": "8192",
    "fsdp": "0",
    "tp": "4",
    "pp": "4",
    "cp": "1",
    "vp": "5",
    "ep": "1",
}


def test_nemo_megatron_bridge(tmp_path: Path) -> None:
    rows = [
        {**NEMO, "precision": "FP8-CS", "tokens_per_sec_per_gpu": "2,000"},
        {
            **NEMO,
            "precision": "FP8-CS",
            "tokens_per_sec_per_gpu": "1900",
            "in_latest": "False",
            "last_date": "2026-02-20",
        },
        {**NEMO, "precision": "NVFP4", "tokens_per_sec_per_gpu": "2500"},
        {**NEMO, "precision": "BF16", "model": "Qwen3_30B_a3B", "tokens_per_sec_per_gpu": "2500"},
        {**NEMO, "precision": "FP8", "task": "LoRA", "tokens_per_sec_per_gpu": "2500"},
    ]
    result = import_nvidia_nemo_megatron_bridge_perf_summary(
        write(tmp_path, "nvidia_nemo_megatron_bridge_perf_summary", H_NEMO, rows)
    )
    check_schema(result.rows)
    assert result.skipped == {
        "superseded by a later version of the same workload on the page": 1,
        "precision without a schema value: NVFP4": 1,
        "model without a catalog key": 1,
        "LoRA row (adapter rank not stated)": 1,
    }
    row = result.rows.iloc[0]
    assert row["step_time_s"] == pytest.approx(128 * 8192 / (2000 * 64))
    assert (row["gpu"], row["precision"], row["strategy"], row["grad_accum_steps"]) == (
        "B200",
        "fp8",
        "zero1",
        32,
    )


def test_nemo_automodel_uses_published_step_time(tmp_path: Path) -> None:
    row = {
        "repo": "NVIDIA-NeMo/Automodel",
        "path": "docs/performance-summary.md",
        "last_commit": "3" * 40,
        "first_date": "2026-04-10",
        "last_date": "2026-06-12",
        "in_latest": "True",
        "section": "Pre-Training Performance > System: DGX-H100, Precision: BF16",
        "system": "DGX-H100",
        "precision": "BF16",
        "model": "Llama3 70B",
        "n_gpus": "64",
        "global_batch_size": "128",
        "micro_batch_size": "1",
        "grad_accum": "4",
        "seq_len": "8192",
        "tp": "1",
        "pp": "1",
        "cp": "2",
        "fsdp": "32",
        "step_time_s": "18.90",
        "tokens_per_sec_per_gpu": "866.77",
    }
    lora = {**row, "section": "Fine-Tuning (LoRA) Performance", "model": "Llama3 8B"}
    result = import_nvidia_nemo_automodel_perf_summary(
        write(tmp_path, "nvidia_nemo_automodel_perf_summary", H_AUTO, [row, lora])
    )
    check_schema(result.rows)
    assert result.skipped == {"LoRA row (adapter rank not stated)": 1}
    assert result.rows.iloc[0]["step_time_s"] == pytest.approx(18.90)
    assert result.rows.iloc[0]["tokens_per_s"] == pytest.approx(866.77 * 64)


# --- DGX Cloud --------------------------------------------------------------------------------


def test_dgxc_title_config_join_and_skips(tmp_path: Path) -> None:
    base = {
        "source_repo": "NVIDIA/dgxc-benchmarking",
        "refs": "v25.04(2025-06-09)",
        "blob": "abc123",
        "gpu": "H100",
        "precision": "BF16",
    }
    rows = [
        {
            **base,
            "readme_path": "nemotron/README_15b.md",
            "table_title": "Nemotron4 15b BF16 (TP=4, PP=1, MBS=4, GA=4)",
            "column_header": "Throughput on 16x H100 GPUs (GBS=64)",
            "title_config": "TP=4, PP=1, MBS=4, GA=4",
            "n_gpus": "16",
            "global_batch_size": "64",
            "step_time_s": "2.83",
            "tokens_per_sec_total": "92630",
            "mfu": "50%",
        },
        {
            **base,
            "refs": "v25.01(2025-06-09)",
            "readme_path": "nemotron/README_15b.md",
            "table_title": "Nemotron4 15b 24.11 BF16 (TP=4, PP=1, MBS=4, GA=4)",
            "column_header": "Throughput on 16x H100 GPUs (GBS=64)",
            "title_config": "TP=4, PP=1, MBS=4, GA=4",
            "n_gpus": "16",
            "global_batch_size": "64",
            "step_time_s": "2.83",
            "tokens_per_sec_total": "92630",
        },  # the same numbers under another tag
        {
            **base,
            "readme_path": "llama3.1/README.md",
            "table_title": "Llama 3.1 8b BF16",
            "column_header": "8x H100 GPUs",
            "n_gpus": "8",
            "step_time_s": "12.27",
            "tokens_per_sec_total": "85459",
        },  # joined with the configs table
        {
            **base,
            "readme_path": "llama3.1/README.md",
            "table_title": "Llama 3.1 70b BF16",
            "column_header": "64x H100 GPUs",
            "n_gpus": "64",
            "step_time_s": "8.7  5",
            "tokens_per_sec_total": "117965",
        },
        {
            **base,
            "readme_path": "grok1/README.md",
            "table_title": "Grok1 314b BF16",
            "column_header": "512x H100 GPUs",
            "n_gpus": "512",
            "step_time_s": "15.9",
            "tokens_per_sec_total": "526493",
        },
    ]
    configs = [
        {
            "readme_path": "llama3.1/README.md",
            "refs": "v25.04(2025-06-09);v25.04.01(2025-06-09)",
            "section": "Overview",
            "col_CP": "2",
            "col_GA": "32",
            "col_GBS": "GPUs*16",
            "col_GPUs": "8-128",
            "col_MBS": "1",
            "col_PP": "1",
            "col_Precision": "BF16/FP8",
            "col_SeqLen": "8192",
            "col_Size": "8b",
            "col_TP": "1",
            "col_Layers": "32",
        }
    ]
    write(tmp_path, "nvidia_dgxc_benchmarking_configs", H_DGXC_CFG, configs)
    result = import_nvidia_dgxc_benchmarking_step_times(
        write(tmp_path, "nvidia_dgxc_benchmarking_step_times", H_DGXC, rows)
    )
    check_schema(result.rows)
    assert result.skipped == {
        "same numbers listed under another tag": 1,
        "malformed number cell": 1,
        "model without a catalog key (Grok-1)": 1,
    }
    by = result.rows.set_index("model_name")
    nem = by.loc["nemotron4-15b"]
    assert (nem["tensor_parallel"], nem["micro_batch_size"], nem["grad_accum_steps"], nem["seq_len"]) == (
        4,
        4,
        4,
        4096,
    )
    assert nem["step_time_s"] == pytest.approx(2.83) and nem["reported_mfu"] == pytest.approx(0.5)
    llama = by.loc["llama3.1-8b"]
    assert (
        llama["context_parallel"],
        llama["global_batch_size"],
        llama["seq_len"],
        llama["grad_accum_steps"],
    ) == (2, 128, 8192, 32)


# --- torchtitan, Megatron, BLOOM, MAMF, MLPerf ---------------------------------------------------


def test_torchtitan(tmp_path: Path) -> None:
    base = {
        "source": "pytorch/torchtitan@395a5262:docs/performance.md",
        "table": "Llama 2",
        "gpu": "A100 80GB",
        "n_gpus": "64",
        "precision": "bf16",
        "parallelism": "FSDP2 (1D), dp_shard=64",
        "notes": "WPS = tokens/s per GPU",
    }
    rows = [
        {
            **base,
            "model": "Llama 2 13B",
            "seq_len_note": "text says Llama 2 default seq len is 4096",
            "local_batch_size": "2",
            "global_batch_size": "128",
            "activation_checkpointing": "no",
            "tokens_per_sec_per_gpu": "2162",
            "mfu": "61.1%",
        },
        {
            **base,
            "model": "Llama 2 70B",
            "local_batch_size": "2",
            "activation_checkpointing": "selective op",
            "tokens_per_sec_per_gpu": "OOM",
            "mfu": "OOM",
        },
        {
            **base,
            "model": "Llama 3.1 8B",
            "gpu": "H200 (8/host, 400Gb/s RDMA per GPU)",
            "n_gpus": "",
            "derived_n_gpus": "32",
            "precision": "bf16 + float8 linears",
            "seq_len_note": "llama3_8b.toml: seq_len=8192",
            "local_batch_size": "2",
            "activation_checkpointing": "full",
            "tokens_per_sec_per_gpu": "10,938",
            "memory_gib": "47.96",
        },
        {
            **base,
            "model": "Llama 3 8B",
            "gpu": "NVIDIA Blackwell SM100+ (exact model not stated)",
            "derived_n_gpus": "4",
            "seq_len": "2048",
            "local_batch_size": "32",
            "tokens_per_sec_per_gpu": "30,040",
        },
    ]
    result = import_torchtitan_benchmarks(write(tmp_path, "torchtitan_benchmarks", H_TITAN, rows))
    check_schema(result.rows)
    assert result.skipped == {
        "OOM cell (the schema requires a step time)": 1,
        "gpu not in catalog: NVIDIA Blackwell SM100+ (exact model not stated)": 1,
    }
    a100, h200 = result.rows.sort_values("gpu").to_dict("records")
    assert a100["reported_mfu"] == pytest.approx(0.611) and a100["activation_checkpointing"] is False
    assert a100["step_time_s"] == pytest.approx(128 * 4096 / (2162 * 64))
    assert (h200["precision"], h200["global_batch_size"], h200["seq_len"]) == ("fp8", 64, 8192)
    assert h200["tokens_per_s"] == pytest.approx(10938 * 32)
    assert h200["peak_memory_gb"] == pytest.approx(47.96 * 1.073741824)


def test_megatron_formula_reproduces_readme_and_rows_need_micro_batch(tmp_path: Path) -> None:
    # README: GPT-3 175B on 1024 A100, GBS 1536: "each iteration takes around 32 seconds ... 138 teraFLOPs per GPU".
    assert _flops_2021(1536, 2048, 96, 12288, 51200) / (138e12 * 1024) == pytest.approx(32, rel=0.01)
    row = {
        "source": "NVIDIA/Megatron-LM@8cfef1bf:README.md",
        "table": "cases (Apr 2021)",
        "model": "GPT 1.7B",
        "params_billion": "1.7",
        "n_layers": "24",
        "d_model": "2304",
        "seq_len": "2048",
        "vocab_size": "51200",
        "gpu": "A100 80GB",
        "n_gpus": "32",
        "global_batch_size": "512",
        "precision": "half precision (mixed)",
        "parallelism": "model-parallel size 1 (TP x PP combined)",
        "achieved_tflops_per_gpu": "137",
    }
    jan = {**row, "table": "cases (Jan 2021)", "n_heads": "24"}
    result = import_megatron_lm_readme_scaling(
        write(
            tmp_path,
            "megatron_lm_readme_scaling",
            "source,table,model,params_billion,n_layers,d_model,n_heads,seq_len,vocab_size,gpu,"
            "n_gpus,global_batch_size,precision,parallelism,tp,pp,dp,achieved_tflops_per_gpu,"
            "pct_of_peak,mfu,hfu,aggregate_pflops,step_time_s,notes",
            [jan, row],
        )
    )
    assert len(result.rows) == 0
    assert result.skipped == {
        "A100 memory size not stated": 1,
        "micro batch size not stated (the schema requires it)": 1,
    }


def test_bloom_final_run(tmp_path: Path) -> None:
    final = {
        "source": "bigscience-workshop/bigscience@9e64edec:train/tr11-176B-ml/README.md",
        "section": "Important checkpoints",
        "col_DP": "8",
        "col_GBS": "2048",
        "col_GPUs": "384",
        "col_MBS": "2",
        "col_Nodes": "48",
        "col_PP": "12",
        "col_Sec_per_it": "104.70",
        "col_TP": "4",
        "col_TFLOPs": "149.77",
        "notes": "BLOOM-176B main training; bf16",
    }
    topo = {**final, "section": "A100 experiments", "notes": "GPUs: A100 80GB nodes"}
    result = import_bigscience_bloom176b_throughput(
        write(tmp_path, "bigscience_bloom176b_throughput", H_BLOOM, [final, topo])
    )
    check_schema(result.rows)
    assert result.skipped == {"topology experiment table: precision and model dims not stated per table": 1}
    row = result.rows.iloc[0]
    assert (row["step_time_s"], row["grad_accum_steps"], row["model_name"]) == (104.70, 128, "bloom-176b")


def test_mamf_dtype_from_table_order(tmp_path: Path) -> None:
    header = "source,dtype,accelerator,mamf_tflops,theoretical_tflops,efficiency,best_shape_MxNxK,torch_version,notes,method"
    rows = [
        {
            "source": "stas00/ml-engineering@744d01e1:compute/accelerator/README.md",
            "dtype": "FP8 (float8_e4m3fn)",
            "accelerator": acc,
            "mamf_tflops": m,
            "theoretical_tflops": t,
            "efficiency": e,
        }
        for acc, m, t, e in [
            ("NVIDIA A100 SXM", "271.2", "312", "86.9%"),
            ("NVIDIA H100 SXM", "794.5", "989", "80.3%"),
            ("NVIDIA H100 SXM", "1402.6", "1979", "70.9%"),
            ("AMD MI300X", "", "2600", ""),
        ]
    ]
    mamf = read_mamf_matmul(write(tmp_path, "ml_engineering_mamf_matmul", header, rows))
    assert mamf[["gpu", "dtype"]].values.tolist() == [
        ["A100-80GB", "bf16"],
        ["H100-SXM", "bf16"],
        ["H100-SXM", "fp8"],
    ]


def test_mlperf_is_skipped_with_a_reason(tmp_path: Path) -> None:
    result = import_mlperf_training_results_runs(
        write(tmp_path, "mlperf_training_results_runs", "round,source", [{"round": "v1.0"}] * 3)
    )
    assert len(result.rows) == 0 and sum(result.skipped.values()) == 3


# --- mappings and committed files -----------------------------------------------------------


def test_mapping_values_are_catalog_keys() -> None:
    from collectors.public import dgxc, lambda_labs, ml_engineering, mosaicml, nemo, neusight, torchtitan
    from perfmodel.catalog import resolve_gpu_key, resolve_model_key

    gpu_maps = [
        mosaicml.GPU_KEYS,
        lambda_labs.GPU_KEYS,
        neusight.GPU_KEYS,
        nemo.GPU_KEYS,
        dgxc.GPU_KEYS,
        torchtitan.GPU_KEYS,
        ml_engineering.MAMF_GPU_KEYS,
    ]
    gpus = {v for m in gpu_maps for v in m.values() if v}
    assert {g for g in gpus if resolve_gpu_key(g) != g} == set()
    models = {
        *mosaicml.MODEL_KEYS.values(),
        *(t[0] for t in lambda_labs.TASKS.values()),
        *(t[0] for t in neusight.MODELS.values()),
        *(t[0] for t in nemo.MODELS.values()),
        *torchtitan.MODELS.values(),
    }
    # Not in the model catalog: Lambda's Transformer-XL rows state their own dims (TXL_DIMS);
    # its SSD300 rows are dropped by `dataset build` (no forward FLOPs).
    not_in_catalog = {m for m in models if resolve_model_key(m) != m}
    assert not_in_catalog == {"transformer-xl-base", "transformer-xl-large", "ssd300"}


# --- the row builder --------------------------------------------------------------------------


def test_training_row_derives_throughput_and_nodes_from_what_the_source_states() -> None:
    row = common.training_row(
        citation="x@0:README.md",
        model=("llama3-8b", "llama"),
        batch=common.Batch(micro_batch_size=2, global_batch_size=64, seq_len=2048),
        layout=common.Layout("H100-SXM", 16, "fsdp"),
        precision="amp_bf16",
        step_time_s=2.0,
        framework="torchtitan",
        notes="a note",
    )
    assert row["samples_per_s"] == 32.0  # 64 samples / 2 s
    assert row["tokens_per_s"] == 65536.0  # 64 x 2048 tokens / 2 s
    assert row["num_nodes"] == 2  # 16 H100 SXM in 8-GPU HGX servers
    assert (row["arch"], row["optimizer"], row["grad_accum_steps"], row["tensor_parallel"]) == (
        "decoder",
        "adamw",
        1,
        1,
    )
    assert row["notes"] == "a note"
    gb200 = common.training_row(
        citation="x",
        model=common.ModelRef("resnet50", "resnet", "cnn"),
        batch=common.Batch(256, 1024),
        layout=common.Layout("GB200", 16),
        precision="bf16",
        step_time_s=0.5,
        framework="dle-ngc",
        tokens_per_s=None,
    )
    assert gb200["num_nodes"] == 4  # GB200 NVL72 compute trays hold 4 GPUs
    assert (gb200["arch"], gb200["seq_len"], gb200["tokens_per_s"], gb200["samples_per_s"]) == (
        "cnn",
        None,
        None,
        2048.0,
    )


def test_sink_skips_rows_without_a_step_time_and_shares_run_groups_by_run_key() -> None:
    sink = common.RowSink("fixture")
    fields = dict(
        citation="x@0:README.md",
        model=("llama3-8b", "llama"),
        batch=common.Batch(1, 8, 8192),
        layout=common.Layout("H100-SXM", 8),
        precision="amp_bf16",
        framework="nemo",
    )
    sink.add(config={"tag": "a"}, run_key={"cfg": 1}, step_time_s=1.0, **fields)
    sink.add(config={"tag": "b"}, run_key={"cfg": 1}, step_time_s=1.1, repeat_index=1, **fields)
    sink.add(config={"tag": "c"}, run_key={"cfg": 2}, step_time_s=1.2, **fields)
    sink.add(config={"tag": "d"}, step_time_s=float("nan"), **fields)
    sink.add(config={"tag": "e"}, step_time_s=0.0, **fields)
    result = sink.result()
    assert result.skipped == {"no positive step time derivable": 2}
    rows = result.rows.set_index("step_time_s")
    assert rows.loc[1.0, "run_group"] == rows.loc[1.1, "run_group"] != rows.loc[1.0, "row_id"]
    assert rows.loc[1.2, "run_group"] == rows.loc[1.2, "row_id"]  # alone in its run
    assert rows["repeat_index"].tolist() == [0, 1, 0]


def _committed() -> pd.DataFrame:
    files = [p for p in sorted(PUBLIC.glob("*.parquet")) if p.name != "mamf_matmul.parquet"]
    if not files:
        pytest.skip("datasets/public has no parquet files (run `perfmodel dataset import-public`)")
    return pd.concat([pd.read_parquet(p) for p in files], ignore_index=True)


def test_committed_public_rows_conform_and_cover_enough_hardware() -> None:
    frame = _committed()
    assert list(frame.columns) == list(COLUMN_NAMES)
    conform(frame)
    assert not frame[list(REQUIRED)].isna().any().any()
    assert len(frame) >= 2000
    assert frame["gpu"].nunique() >= 8
    assert frame["citation"].str.strip().str.len().gt(0).all()
    assert frame["row_id"].is_unique
    assert (frame["source_kind"] == "public").all() and (frame["benchmark_kind"] == "public_training").all()
    assert frame["step_time_s"].gt(0).all()
    assert set(frame["precision"]) <= {"fp32", "tf32", "amp_bf16", "amp_fp16", "bf16", "fp16", "fp8"}
    assert frame["run_group"].notna().all()
    assert frame["sample_weight"].isna().all()  # set by `dataset build` over the whole table


def test_committed_gpus_resolve_in_the_catalog() -> None:
    from perfmodel.catalog import gpu_names, resolve_gpu_key

    frame = _committed()
    known = set(gpu_names())
    if len(known) < 10:
        pytest.skip("GPU catalog not written yet")
    assert {g for g in frame["gpu"].unique() if resolve_gpu_key(g) != g} == set()
    mamf = pd.read_parquet(PUBLIC / "mamf_matmul.parquet")
    assert {g for g in mamf["gpu"].dropna().unique() if resolve_gpu_key(g) != g} == set()
