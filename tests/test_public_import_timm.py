"""timm training-benchmark importer on the real shared CSV (skipped when shared/data is absent):
kept rows and skip reasons against counts taken with pandas on the CSV, hand-checked rows (CSV
line numbers in comments), citations, one run_group per (model, image size) that a group-aware
splitter never splits, and one vote per run."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from collectors.public import IMPORTERS, default_public_dir
from collectors.public.timm import import_timm_benchmark_train, model_family, vit_dims
from perfmodel.schema import COLUMN_NAMES, fill_run_defaults

CSV = default_public_dir() / "timm_benchmark_train.csv"
pytestmark = pytest.mark.skipif(not CSV.is_file(), reason=f"{CSV} not present (shared data)")


@pytest.fixture(scope="module")
def result():
    return import_timm_benchmark_train(CSV)


@pytest.fixture(scope="module")
def source() -> pd.DataFrame:
    return pd.read_csv(CSV, dtype=str, keep_default_na=False)


def one(rows: pd.DataFrame, model: str, torch: str) -> pd.Series:
    match = rows[(rows["model_name"] == model) & (rows["torch_version"] == torch)]
    assert len(match) == 1, (model, torch, len(match))
    return match.iloc[0]


def test_registered() -> None:
    assert IMPORTERS["timm_benchmark_train"] is import_timm_benchmark_train


def test_kept_rows_and_skip_reasons_match_counts_taken_on_the_csv(result, source) -> None:
    latest = source["in_latest_version"] == "True"
    nchw = latest & (source["memory_layout"] == "nchw")
    has_flops = source["derived_infer_gmacs_same_img"] != ""
    keys = ["model", "src_train_img_size", "src_param_count_m"]
    with_flops = set(map(tuple, source.loc[has_flops, keys].to_numpy()))
    joinable = nchw & pd.Series([tuple(k) in with_flops for k in source[keys].to_numpy()], index=source.index)
    skipped = result.skipped
    assert (
        skipped["superseded: Jan-2022 pt110 value replaced by the Apr-2022 re-run of the same file"]
        == (~latest).sum()
    )
    assert (
        skipped["channels_last (NHWC) memory layout: the NCHW row is kept (NHWC checks bench/channels_last.py)"]
        == (latest & (source["memory_layout"] == "nhwc")).sum()
    )
    assert (
        skipped["no GMACs for this model at its train image size in timm's inference CSVs"]
        == (nchw & ~joinable).sum()
    )
    assert len(result.rows) == joinable.sum()
    # the same numbers read off the CSV once by hand-run pandas filters (2022 sweep, 6,084 rows)
    assert (len(source), (~latest).sum(), len(result.rows)) == (6084, 1400, 2158)
    assert len(result.rows) + sum(skipped.values()) == len(source)
    assert list(result.rows.columns) == list(COLUMN_NAMES)


def test_hand_checked_rows(result) -> None:
    rows = result.rows
    # CSV line 1583: resnet50, pt110 (Apr-2022 re-run), nchw: 833.11 samples/s, 460.106 ms/step, batch 384,
    # 25.56 M params, 4.11 GMACs, 11.11 M activations
    r = one(rows, "resnet50", "1.10")
    assert r["step_time_s"] == pytest.approx(0.460106)
    assert r["samples_per_s"] == pytest.approx(833.11)
    assert (r["micro_batch_size"], r["global_batch_size"], r["num_gpus"]) == (384, 384, 1)
    assert r["params_total"] == 25_560_000
    assert r["forward_gflops_per_sample"] == pytest.approx(8.22)  # 2 FLOPs per MAC
    # what autograd saves for backward, measured (timm_saved_activations.csv: resnet50 at 224 px,
    # 42.662 MB per sample), not timm's conv-output count (11.11 M x 2 bytes = 22.22 MB)
    assert r["activation_mb_per_sample"] == pytest.approx(42.662)
    assert "measured: collectors/public/timm_saved_activations.csv" in r["notes"]
    assert (r["gpu"], r["precision"], r["optimizer"], r["framework"]) == (
        "RTX-3090",
        "amp_fp16",
        "sgd_momentum",
        "torch-eager",
    )
    assert (r["arch"], r["model_family"], r["collected_at"]) == ("cnn", "resnet", "2022-04-04")
    # CSV line 4648: resnet50, pt112, nchw: 826.06 samples/s, 618.983 ms, batch 512; no GMACs in that
    # file: the pt110 inference value of line 1583 (same model, 224 px, 25.56 M params)
    r = one(rows, "resnet50", "1.12")
    assert (r["step_time_s"], r["micro_batch_size"]) == (pytest.approx(0.618983), 512)
    assert r["forward_gflops_per_sample"] == pytest.approx(8.22)
    # CSV line 1839: vit_base_patch16_224, pt110: 359.03 samples/s, 355.693 ms, batch 128; ViT-Base/16:
    # width 768, depth 12, 12 heads, MLP 3072, 196 patches + [CLS] = 197 tokens (ViT paper table 1)
    r = one(rows, "vit_base_patch16_224", "1.10")
    assert r["arch"] == "encoder" and r["attention_kernel"] == "eager"
    assert (r["hidden_size"], r["num_layers"], r["num_heads"], r["ffn_hidden_size"], r["seq_len"]) == (
        768,
        12,
        12,
        3072,
        197,
    )
    assert (r["vocab_size"], r["learned_pos_embeddings"], r["params_total"]) == (0, 197, 86_570_000)
    assert r["step_time_s"] == pytest.approx(0.355693)
    # CSV line 4988: efficientnet_b4 in pt112 trained at 320 px; timm's inference CSVs have it only at 384
    assert rows[(rows["model_name"] == "efficientnet_b4") & (rows["torch_version"] == "1.12")].empty
    # NHWC rows are never kept (CSV line 2291: resnet50 pt110 nhwc, 316.583 ms)
    assert not rows["step_time_s"].round(6).eq(0.316583).any()


def test_every_row_cites_its_file_and_commit(result) -> None:
    citations = result.rows["citation"]
    assert citations.str.match(
        r"^huggingface/pytorch-image-models@[0-9a-f]{40}:results/benchmark-train-amp-nchw-"
    ).all()
    r = one(result.rows, "resnet50", "1.10")
    assert "eac2df3d2c5bba0227ad6e9f9704f12eb5c1e405" in r["citation"] and "pt110" in r["citation"]


def test_torch_versions_of_one_model_share_a_run_group_that_group_kfold_never_splits(result) -> None:
    from sklearn.model_selection import GroupKFold

    rows = result.rows
    resnet = rows[rows["model_name"] == "resnet50"]
    assert sorted(resnet["torch_version"]) == ["1.10", "1.11", "1.12"]
    assert resnet["run_group"].nunique() == 1
    assert sorted(resnet["repeat_index"]) == [0, 1, 2]
    # two image sizes of one model are two configurations
    assert rows.groupby("run_group")[["model_name", "seq_len"]].nunique(dropna=False).max().max() == 1
    groups = rows["run_group"].to_numpy()
    for train, test in GroupKFold(n_splits=5).split(np.zeros(len(rows)), groups=groups):
        assert not set(groups[train]) & set(groups[test])
        in_test = set(rows.index[test])
        assert set(resnet.index) <= in_test or not set(resnet.index) & in_test


def test_one_run_is_one_vote(result) -> None:
    filled = fill_run_defaults(result.rows)
    assert filled["sample_weight"].sum() == pytest.approx(filled["run_group"].nunique())
    resnet = filled[filled["model_name"] == "resnet50"]
    assert resnet["sample_weight"].tolist() == pytest.approx([1 / 3] * 3)


@pytest.mark.slow
def test_every_row_is_costable(result) -> None:
    from perfmodel.analytic import estimate
    from perfmodel.codec import workload_from_row

    for _, row in result.rows.iterrows():
        bound = estimate(workload_from_row(row.to_dict())).t_roofline_s
        assert math.isfinite(bound) and 0 < bound < row["step_time_s"]


def test_vit_dims_from_the_name_only_when_they_reproduce_timm_counts() -> None:
    # ViT-L/16 at 224: width 1024, depth 24, 16 heads (ViT paper table 1); CSV line 2025: 304.33 M params, 61.6 GMACs
    dims = vit_dims("vit_large_patch16_224", 224, 304.33e6, 61.6)
    assert dims is not None
    assert (dims["hidden_size"], dims["num_layers"], dims["num_heads"], dims["seq_len"]) == (
        1024,
        24,
        16,
        197,
    )
    # DeiT distilled: class + distillation token; CSV line 1577: 22.44 M params, 4.63 GMACs
    assert vit_dims("deit_small_distilled_patch16_224", 224, 22.44e6, 4.63)["seq_len"] == 198  # type: ignore[index]
    assert vit_dims("vit_large_patch16_224", 224, 200e6, 61.6) is None  # parameter count does not match
    assert (
        vit_dims("vit_relpos_base_patch16_224", 224, 86.43e6, 17.51) is None
    )  # relative positions: not a plain ViT
    assert vit_dims("resnet50", 224, 25.56e6, 4.11) is None


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("resnet50", "resnet"),
        ("gluon_seresnext101_32x4d", "resnet"),
        ("tf_efficientnet_b4", "efficientnet"),
        ("mobilenetv3_large_100", "efficientnet"),
        ("vit_base_patch16_224", "vit"),
        ("swin_tiny_patch4_window7_224", "vit"),
        ("mixer_b16_224", "mlp-mixer"),
        ("regnety_032", "regnet"),
        ("dm_nfnet_f0", "nfnet"),
        ("densenet121", "cnn-other"),
    ],
)
def test_model_family(name: str, family: str) -> None:
    assert model_family(name) == family


def test_saved_activations_are_the_catalogs_measure_and_fall_back_to_timms_count(result, tmp_path) -> None:
    from collectors.public.timm import measured_saved_mb
    from perfmodel.analytic.step import CNN_SAVED_PER_NORM_INPUT

    resnet50 = measured_saved_mb("resnet50", 224, 25.557)
    # the table measures what the catalog measures: ResNet-50 at 224 px (catalog resnet50.yaml: 42 MB)
    assert resnet50 == pytest.approx(42.0, rel=0.02)
    # the CNN plan's rule (step.CNN_SAVED_PER_NORM_INPUT: half of what a CNN saves is batch-norm
    # input, i.e. convolution output) reproduces timm's count of ResNet-50's convolution outputs
    # (CSV line 1583: 11.11 M activations = 22.22 MB at 2 bytes)
    assert resnet50 / CNN_SAVED_PER_NORM_INPUT == pytest.approx(22.22, rel=0.05)
    # an EfficientNet saves far more than its conv outputs (timm: 6.75 M activations = 13.5 MB)
    assert measured_saved_mb("efficientnet_b0", 224, 5.288) > 3 * 13.5
    rows = result.rows
    measured = rows["notes"].str.contains("saved for backward")
    assert measured.mean() > 0.9
    fallback = rows[~measured]
    assert fallback["notes"].str.contains("not in the saved-activation table").all()
    assert measured_saved_mb("resnet50", 224, 25.557, tmp_path / "absent.csv") is None


def test_a_measured_row_of_another_size_is_not_used(result) -> None:
    from collectors.public.timm import measured_saved_mb

    # timm 0.9.16 builds convnext_tiny_in22ft1k as the real tiny (28.6 M parameters); the sweep's
    # row of that name ran convnext_base's config (88.59 M, CSV line 1900): its measure is not used
    assert measured_saved_mb("convnext_tiny_in22ft1k", 224, 28.589) is not None
    assert measured_saved_mb("convnext_tiny_in22ft1k", 224, 88.59) is None
    assert measured_saved_mb("not_a_model", 224, 1.0) is None
    rows = result.rows
    tiny = rows[rows["model_name"] == "convnext_tiny_in22ft1k"]
    assert not tiny.empty
    assert tiny["notes"].str.contains("not in the saved-activation table").all()
    base = rows[rows["model_name"] == "convnext_base_in22ft1k"]
    # the same network, so the same count: timm's 28.75 M activations x 2 bytes
    assert tiny["activation_mb_per_sample"].eq(2 * 28.75).all()
    assert base["notes"].str.contains("saved for backward").all()
