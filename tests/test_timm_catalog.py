"""perfmodel's timm table (perfmodel/catalog/timm_models.csv): `timm/<name>` resolves to the numbers
the feature table trained on, and the committed table is what collectors/public/timm_catalog.py
derives from the committed timm rows."""

from __future__ import annotations

import pytest

from collectors.public.timm_catalog import ROWS, catalog_frame
from perfmodel.catalog import get_model
from perfmodel.catalog.models import TIMM_TABLE, timm_model
from perfmodel.errors import CatalogError


def test_a_timm_name_resolves_to_its_table_row_at_its_training_image_size():
    """ResNeXt-50 32x4d at 224 px: timm's 25.03 M parameters and 4.26 GMACs (8.52 GFLOPs), 54 GEMMs of
    which 16 grouped (the census: 0.462422 GFLOPs, 6.57306 M elements; tests/test_step_plan.py works
    them by hand)."""
    spec, side = timm_model("timm/resnext50_32x4d")
    assert side == 224 and spec.reference_input == "224x224 image"
    assert (spec.arch, spec.family, spec.params_total) == ("cnn", "resnet", 25_030_000)
    assert spec.forward_gflops_per_sample == pytest.approx(8.52)
    assert (spec.gemm_layers, spec.grouped_layers, spec.depthwise_layers) == (54, 16, 0)
    assert spec.grouped_gflops_per_sample == pytest.approx(0.462422)
    assert get_model("TIMM/resnext50_32x4d.a1h_in1k") == spec  # prefix any case, pretrained tag dropped


def test_an_unknown_timm_name_suggests_the_close_ones():
    with pytest.raises(CatalogError, match=r"unknown timm model 'convnext_tiniest'; did you mean convnext_tiny"):
        get_model("timm/convnext_tiniest")


def test_the_committed_table_is_what_the_timm_rows_give():
    pd = pytest.importorskip("pandas")
    built = catalog_frame(pd.read_parquet(ROWS))
    committed = pd.read_csv(TIMM_TABLE)
    assert list(committed.columns) == list(built.columns)
    assert committed["model"].tolist() == built["model"].tolist()
    numeric = built.columns[4:]
    assert committed[numeric].to_numpy() == pytest.approx(built[numeric].to_numpy(), rel=1e-5)
