"""NVIDIA DeepLearningExamples README importer on the real shared CSV (skipped when shared/data is
absent): rows kept and skipped per README against counts taken with pandas on the CSV,
hand-checked rows (CSV line numbers in comments), citations, shared run groups for one
configuration measured in two tables, and the batch-cell reader on the READMEs' spellings."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from collectors.public import IMPORTERS, default_public_dir
from collectors.public.dle import (
    BINNED_PHASE2,
    BINNED_PHASE2_PATHS,
    CNN_DIMS,
    import_nvidia_deeplearningexamples_readme_train,
    pair_cell,
)
from perfmodel.schema import COLUMN_NAMES, fill_run_defaults

CSV = default_public_dir() / "nvidia_deeplearningexamples_readme_train.csv"
pytestmark = pytest.mark.skipif(not CSV.is_file(), reason=f"{CSV} not present (shared data)")
IMPLAUSIBLE = "implausible: throughput implies more FLOP/s per GPU than the datasheet peak of its precision"


@pytest.fixture(scope="module")
def result():
    return import_nvidia_deeplearningexamples_readme_train(CSV)


@pytest.fixture(scope="module")
def source() -> pd.DataFrame:
    return pd.read_csv(CSV, dtype=str, keep_default_na=False)


def kept_from(rows: pd.DataFrame, readme: str) -> pd.DataFrame:
    return rows[rows["citation"].str.contains(f":{readme} (", regex=False)]


def one(rows: pd.DataFrame, readme: str, raw: str, **columns: object) -> pd.Series:
    match = kept_from(rows, readme)
    match = match[match["citation"].str.contains(raw, regex=False)]
    for column, value in columns.items():
        match = match[match[column] == value]
    assert len(match) == 1, (readme, raw, columns, len(match))
    return match.iloc[0]


def test_registered() -> None:
    assert (
        IMPORTERS["nvidia_deeplearningexamples_readme_train"]
        is import_nvidia_deeplearningexamples_readme_train
    )


def test_every_source_row_is_kept_or_skipped_with_a_reason(result, source) -> None:
    assert len(source) == 1153
    assert len(result.rows) + sum(result.skipped.values()) == len(source)
    assert list(result.rows.columns) == list(COLUMN_NAMES)
    assert result.rows["framework"].eq("dle-ngc").all()


@pytest.mark.parametrize(
    ("readme", "kept"),
    [
        # every row of these READMEs is kept (all GPUs in the catalog, batch stated)
        ("PyTorch/Recommendation/NCF/README.md", "all"),
        ("TensorFlow/Classification/ConvNets/resnet50v1.5/README.md", "all"),
        ("TensorFlow/Classification/ConvNets/resnext101-32x4d/README.md", "all"),
        ("MxNet/Classification/RN50v1.5/README.md", "all"),
        ("PyTorch/Classification/ConvNets/resnet50v1.5/README.md", "all"),
        # PaddlePaddle RN50: the two "+ASP" (sparsity) cells are skipped
        ("PaddlePaddle/Classification/RN50v1.5/README.md", "not ASP"),
        # Transformer-XL: the DGX-2H tables are skipped (GPU not in the catalog)
        ("PyTorch/LanguageModeling/Transformer-XL/README.md", "not DGX-2H"),
        # skipped whole READMEs
        ("TensorFlow/LanguageModeling/Transformer-XL/README.md", "none"),
        ("TensorFlow/LanguageModeling/BERT/biobert/README.md", "none"),
        ("PyTorch/Classification/ConvNets/README.md", "none"),
        ("PyTorch/Segmentation/nnUNet/README.md", "none"),
    ],
)
def test_rows_kept_per_readme(result, source, readme: str, kept: str) -> None:
    rows = source[source["citation_path"] == readme]
    expected = {
        "all": len(rows),
        "not ASP": (~rows["src_column"].str.contains("ASP")).sum(),
        "not DGX-2H": (~rows["src_system_heading"].str.contains("DGX-2H")).sum(),
        "none": 0,
    }[kept]
    assert len(rows) > 0
    assert len(kept_from(result.rows, readme)) == expected


def test_skip_reasons(result) -> None:
    skipped = result.skipped
    # BERT multi-node tables print "126" for the TF32 micro-batch (126 x 64 != 8192) in PyTorch and
    # PaddlePaddle (6 rows each) and "16 and 18" accumulation (256 x 18 != 2048) in one PyTorch row
    assert skipped["batch x accumulation steps != accumulated batch in the table (e.g. '126' for 128)"] == 13
    # PyTorch's and PaddlePaddle's phase 2 (sequence length 512) runs binned by length (LDDL, bin size
    # 64: each README's changelog): PyTorch's DGX A100 80GB (16 rows) and DGX-1 V100 32G tables (4:
    # among them "FP32" 19 sequences/s on one V100, CSV line 312, and 149.6 on eight, which at 512
    # tokens a sequence would be faster than the fp32 peak), PaddlePaddle's DGX A100 80GB (16)
    assert skipped[BINNED_PHASE2] == 36
    assert skipped.get(IMPLAUSIBLE, 0) == 0  # the guard stays; what it caught was binned
    assert skipped["ELECTRA pre-training (generator and discriminator trained together)"] == 28
    assert skipped["quantization-aware training (QAT) row"] == 2
    assert skipped["ASP (2:4 structured sparsity) column"] == 2


def test_hand_checked_rows(result) -> None:
    rows = result.rows
    # CSV line 24: MXNet RN50 on DGX A100 80GB, 1 GPU, mixed precision 3410.52 img/s; the command
    # above the table runs "-b 512 --dtype float16"
    r = one(rows, "MxNet/Classification/RN50v1.5/README.md", "| 1 | 3410.52 |", precision="amp_fp16")
    assert (r["gpu"], r["num_gpus"], r["micro_batch_size"], r["global_batch_size"]) == (
        "A100-80GB",
        1,
        512,
        512,
    )
    assert r["samples_per_s"] == pytest.approx(3410.52)
    assert r["step_time_s"] == pytest.approx(512 / 3410.52)
    assert (r["model_name"], r["arch"], r["optimizer"]) == ("resnet50", "cnn", "sgd_momentum")
    # CSV line 406: PyTorch NCF on DGX A100 40GB, 1 GPU, batch 1048576, TF32 "22.59M" samples/s
    r = one(rows, "PyTorch/Recommendation/NCF/README.md", "| 1 | 1048576 | 22.59M", precision="tf32")
    assert r["samples_per_s"] == pytest.approx(22.59e6)
    assert r["step_time_s"] == pytest.approx(1048576 / 22.59e6)
    assert r["gpu"] == "A100-40GB"
    # CSV line 275: PyTorch BERT-large pre-training, 8x A100 80GB, FP16: micro 256, 32 accumulation
    # steps (8192 accumulated per GPU), seq 128, 4591 sequences/s
    r = one(rows, "PyTorch/LanguageModeling/BERT/README.md", "| 8 | 128 and 256 |", precision="amp_fp16")
    assert (r["micro_batch_size"], r["grad_accum_steps"], r["global_batch_size"], r["seq_len"]) == (
        256,
        32,
        65536,
        128,
    )
    assert r["step_time_s"] == pytest.approx(65536 / 4591)
    assert r["tokens_per_s"] == pytest.approx(4591 * 128)
    # CSV line 647: TensorFlow BERT-large on one V100 16GB (DGX-1), mixed precision: batch 16, 4096
    # accumulation steps, global 65536, 134.34 sentences/s
    r = one(rows, "TensorFlow/LanguageModeling/BERT/README.md", "| 1 | 128 | 16 , 8 |", precision="amp_fp16")
    assert (r["gpu"], r["micro_batch_size"], r["grad_accum_steps"], r["global_batch_size"]) == (
        "V100-16GB",
        16,
        4096,
        65536,
    )
    assert r["step_time_s"] == pytest.approx(65536 / 134.34)
    # CSV line 320: PyTorch Transformer-XL base on one A100 40GB, batch 32, TF32 41,527 tok/s; tgt_len
    # 192, 16 layers x 512, 8 heads, inner 2048 (README hyperparameter table)
    r = one(rows, "PyTorch/LanguageModeling/Transformer-XL/README.md", "| 1 | 32 | 41,527", precision="tf32")
    assert (r["seq_len"], r["num_layers"], r["hidden_size"], r["num_heads"], r["ffn_hidden_size"]) == (
        192,
        16,
        512,
        8,
        2048,
    )
    assert r["step_time_s"] == pytest.approx(32 * 192 / 41527)
    assert r["attention_kernel"] == "eager" and "mem_transformer.py" in r["notes"]
    # the PyTorch BERT pre-training row above runs under autocast (run_pretraining.py), SQuAD fine-tuning
    # under apex amp O2 (run_squad.py --fp16): the model in fp16, precision 'fp16'
    bert = kept_from(rows, "PyTorch/LanguageModeling/BERT/README.md")
    squad = bert[bert["notes"].str.contains("SQuAD")]
    pretraining = bert[bert["notes"].str.contains("pre-training")]
    assert set(squad["precision"]) == {"fp16", "fp32", "tf32"} and squad["notes"].str.contains("O2").sum() == (squad["precision"] == "fp16").sum()
    assert set(pretraining["precision"]) >= {"amp_fp16"} and "fp16" not in set(pretraining["precision"])
    # pre-training scripts the model for NVFuser (run_pretraining.py torch.jit.script): torch_compile
    assert pretraining["torch_compile"].eq(True).all() and squad["torch_compile"].isna().all()
    assert bert["attention_kernel"].eq("eager").all()
    # binned phase 2 is skipped (CSV lines 312/313: one V100 32G at 512, 19 sequences/s in fp32, 75 in
    # fp16); phase 1 (128) and TensorFlow's unbinned phase 2 are kept
    for readme in BINNED_PHASE2_PATHS:
        kept = kept_from(rows, readme)
        assert set(kept[kept["notes"].str.contains("pre-training")]["seq_len"]) == {128}
    phase2 = bert[bert["citation"].str.contains("| 1 | 2048 and 2048 |", regex=False)]
    assert phase2.empty
    tf_bert = kept_from(rows, "TensorFlow/LanguageModeling/BERT/README.md")
    assert (tf_bert["seq_len"] == 512).sum() > 0
    # DGX-2 (16 GPUs in one node): NCF at 16 GPUs is one node
    ncf16 = kept_from(rows, "PyTorch/Recommendation/NCF/README.md").query("num_gpus == 16")
    assert len(ncf16) == 2 and ncf16["num_nodes"].eq(1).all() and ncf16["gpu"].eq("V100-32GB").all()


def test_cnn_dims_agree_with_timms_own_inference_figures() -> None:
    timm = default_public_dir() / "timm_benchmark_train.csv"
    if not timm.is_file():
        pytest.skip("timm CSV not present")
    frame = pd.read_csv(timm, dtype=str, keep_default_na=False)
    for key, timm_name, image in [
        ("resnext101-32x4d", "resnext101_32x4d", "224"),
        ("se-resnext101-32x4d", "seresnext101_32x4d", "224"),
        ("efficientnet-b0", "efficientnet_b0", "224"),
        ("efficientnet-b4", "tf_efficientnet_b4", "380"),
    ]:
        row = frame[
            (frame["model"] == timm_name)
            & (frame["src_train_img_size"] == image)
            & (frame["derived_infer_gmacs_same_img"] != "")
        ].iloc[0]
        dims = CNN_DIMS[key]
        assert dims.params == pytest.approx(float(row["src_param_count_m"]) * 1e6)
        assert dims.gflops == pytest.approx(2 * float(row["derived_infer_gmacs_same_img"]))
        assert dims.activation_mb == pytest.approx(2 * float(row["derived_infer_macts_same_img"]))


def test_every_row_cites_the_readme_and_its_table_row(result) -> None:
    citations = result.rows["citation"]
    assert citations.str.startswith(
        "NVIDIA/DeepLearningExamples@729963dd47e7c8bd462ad10bfac7a7b0b604e6dd:"
    ).all()
    assert citations.str.contains("README.md (table '", regex=False).all()
    assert citations.str.contains("row '|", regex=False).all()


def test_one_configuration_in_two_tables_is_one_run(result) -> None:
    from sklearn.model_selection import GroupKFold

    rows = result.rows
    # CSV lines 275 and 280: 8x A100 80GB FP16 seq 128 measured in the single-node table (4591) and as
    # the 1-node row of the multi-node table (4553)
    single = one(rows, "PyTorch/LanguageModeling/BERT/README.md", "| 8 | 128 and 256 |", precision="amp_fp16")
    multi = one(rows, "PyTorch/LanguageModeling/BERT/README.md", "| 4553 |", precision="amp_fp16")
    assert single["run_group"] == multi["run_group"] != single["row_id"]
    assert {single["repeat_index"], multi["repeat_index"]} == {0, 1}
    groups = rows["run_group"].to_numpy()
    for train, test in GroupKFold(n_splits=5).split(np.zeros(len(rows)), groups=groups):
        assert not set(groups[train]) & set(groups[test])
    filled = fill_run_defaults(rows)
    assert filled["sample_weight"].sum() == pytest.approx(filled["run_group"].nunique())
    assert filled.loc[filled["row_id"] == single["row_id"], "sample_weight"].item() == pytest.approx(0.5)


@pytest.mark.slow
def test_every_row_is_costable(result) -> None:
    from perfmodel.analytic import estimate
    from perfmodel.codec import workload_from_row
    from perfmodel.dataset import _fill_from_catalog

    filled, _ = _fill_from_catalog(result.rows)
    for _, row in filled.iterrows():
        bound = estimate(workload_from_row(row.to_dict())).t_roofline_s
        assert math.isfinite(bound) and 0 < bound < row["step_time_s"]


@pytest.mark.parametrize(
    ("column", "cell", "precision", "value"),
    [
        ("Batch size / GPU (TF32 and FP16)", "128 and 256", "amp_fp16", 256),
        ("Batch size / GPU (TF32 and FP16)", "128 and 256", "tf32", 128),
        ("Batch size / GPU: mixed precision, FP32", "16 , 8", "fp32", 8),
        ("Batch size / GPU (FP32 : mixed precision)", "8 : 16", "amp_fp16", 16),
        ("Batch Size / GPU", "128 (FP32) / 256 (AMP)", "fp32", 128),
        ("Batch Size / GPU", "128 (TF) / 256 (AMP)", "tf32", 128),
        ("Batch Size / GPU", "256", "amp_fp16", 256),
        ("Batch size / GPU", "16 and 32", "amp_fp16", None),  # two values, no order stated
    ],
)
def test_pair_cell(column: str, cell: str, precision: str, value: int | None) -> None:
    assert pair_cell(column, cell, precision) == value


def test_timm_described_cnns_take_what_they_save_for_backward_measured(result) -> None:
    from collectors.public.dle import CNN_TIMM
    from collectors.public.timm import measured_saved_mb

    rows = result.rows
    for key, (timm_name, image) in CNN_TIMM.items():
        mine = rows[rows["model_name"] == key]
        assert not mine.empty, key
        # the measured saved tensors (timm_saved_activations.csv), not timm's conv-output count
        assert mine["activation_mb_per_sample"].eq(measured_saved_mb(timm_name, image, CNN_DIMS[key].params / 1e6)).all(), key
        assert mine["activation_mb_per_sample"].gt(CNN_DIMS[key].activation_mb).all(), key
        assert mine["notes"].str.contains(f"saved for backward \\(timm {timm_name} at {image} px").all(), key


def test_16bit_image_classifiers_run_in_the_layout_their_framework_sets(result) -> None:
    """PyTorch's AMP configs (memory_format nhwc), MXNet's float16 runner (--conv-layout NHWC) and
    PaddlePaddle's AMP commands (--data-layout NHWC) run NHWC: channels_last. TensorFlow's ConvNets
    (NCHW by default), every fp32/TF32 row and every non-CNN row do not."""
    rows = result.rows
    stack = rows["notes"].str.extract(r"^NVIDIA DeepLearningExamples (\S+)")[0]
    cnn16 = ((rows["arch"] == "cnn") & rows["precision"].isin(["amp_fp16", "fp16"])).to_numpy(dtype=bool)
    nhwc = rows["channels_last"].fillna(False).to_numpy(dtype=bool)
    assert (nhwc == (cnn16 & stack.isin(["PyTorch", "MxNet", "PaddlePaddle"]).to_numpy(dtype=bool))).all()
    assert 40 <= int(nhwc.sum()) < int(cnn16.sum())  # TensorFlow's 16-bit rows stay NCHW
    # CSV line 24 (above): MXNet RN50, 1x A100 80GB, float16
    r = one(rows, "MxNet/Classification/RN50v1.5/README.md", "| 1 | 3410.52 |", precision="amp_fp16")
    assert bool(r["channels_last"]) and "--conv-layout NHWC" in r["notes"]
