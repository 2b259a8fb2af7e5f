"""The typed metadata.json (`perfmodel.learn.metadata.ModelMetadata`): old files read unchanged,
unknown keys survive a rewrite, missing essentials are one ModelFileError, and what the predictor
holds satisfies the `Corrector` protocol."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from perfmodel.learn.metadata import ModelMetadata, read_model_folder, write_model_folder
from perfmodel.learn.model_files import METADATA_FILE, MODEL_FILE, ModelFileError
from perfmodel.learn.shipped import Corrector, LearnedModel

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "models"
RAW = json.loads((SHIPPED / METADATA_FILE).read_text())


def test_the_shipped_metadata_reads_into_types_and_writes_back_byte_for_byte(tmp_path):
    meta, text = read_model_folder(SHIPPED)
    assert meta.to_json() == RAW
    assert meta.trained_rows == RAW["trained_rows"] > 0
    assert meta.conformal.hardware.quantiles_log == RAW["conformal"]["quantiles_log"]
    assert meta.conformal.family is not None
    assert meta.conformal.family.abs_residuals_sorted == tuple(
        RAW["conformal"]["family"]["abs_residuals_sorted"]
    )
    assert meta.conformal.mondrian is not None and meta.conformal.mondrian.cells["*"]
    assert meta.domain.gpus_seen == frozenset(RAW["domain"]["gpus_seen"])
    assert meta.extra == {}
    write_model_folder(tmp_path, meta, text)
    assert (tmp_path / METADATA_FILE).read_bytes() == (SHIPPED / METADATA_FILE).read_bytes()
    assert (tmp_path / MODEL_FILE).read_bytes() == (SHIPPED / MODEL_FILE).read_bytes()


def test_a_file_without_the_optional_keys_loads_with_their_defaults():
    old = {k: RAW[k] for k in ("feature_names", "domain", "format")}
    old["conformal"] = {"abs_residuals_sorted": [0.1, 0.2]}  # before Mondrian cells and families
    meta = ModelMetadata.from_json(old)
    assert meta.version == "unversioned" and meta.trained_rows == 0 and meta.run_id is None
    assert meta.conformal.mondrian is None and meta.conformal.family is None
    assert meta.conformal.hardware.n_residuals == 2
    assert "run_id" not in meta.to_json() and "mondrian" not in meta.to_json()["conformal"]


def test_keys_of_a_newer_perfmodel_are_kept_through_a_rewrite():
    newer = {**copy.deepcopy(RAW), "kernel_efficiency": {"matmul": [0.7, 0.9]}}
    meta = ModelMetadata.from_json(newer)
    assert meta.extra == {"kernel_efficiency": {"matmul": [0.7, 0.9]}}
    again = meta.registered_as("7", "perfmodel-throughput", None).to_json()
    assert again["kernel_efficiency"] == {"matmul": [0.7, 0.9]}
    assert again["version"] == "7" and again["run_id"] == RAW["run_id"]  # the run is kept when none is given


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("feature_names"), "lacks 'feature_names'"),
        (lambda d: d["conformal"].pop("abs_residuals_sorted"), "lacks 'abs_residuals_sorted'"),
        (lambda d: d["domain"].pop("gpus_seen"), "lacks 'gpus_seen'"),
        (lambda d: d.update(trained_rows="many"), "mangles"),
        (lambda d: d.update(conformal=[1, 2]), "mangles"),
    ],
)
def test_a_file_missing_or_mangling_an_essential_is_one_model_file_error(change, message):
    data = copy.deepcopy(RAW)
    change(data)
    with pytest.raises(ModelFileError, match=message):
        ModelMetadata.from_json(data)


def test_the_learned_model_is_a_corrector_and_its_provenance_follows_its_metadata():
    model = LearnedModel.load(SHIPPED)
    corrector: Corrector = model  # mypy checks the protocol; the attributes are what prediction reads
    assert corrector.version == RAW["version"] and corrector.trained_rows == RAW["trained_rows"]
    model.metadata = model.metadata.replace(version="run-abc")
    assert model.version == "run-abc"
