"""Model folders on disk: verified reads (a damaged or mismatched folder never reaches LightGBM,
whose parser aborts the process), all-or-nothing writes, and the predictor's fallback through
the real `perfmodel predict` entry point."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from perfmodel.learn import model_files
from perfmodel.learn.model_files import METADATA_FILE, MODEL_FILE, ModelFileError

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "models"
EXAMPLE = ROOT / "examples" / "llama2-7b-lora.yaml"
FALLBACK = "learned model not used, falling back to the analytic model"

TEXT = "tree\nversion=v4\nnum_class=1\nfeature_names=a b c\n\nTree=0\nnum_leaves=1\n"
META = {"feature_names": ["a", "b", "c"], "version": "7", "kind": "learned"}


def test_roundtrip_records_the_hash_and_reads_back_the_same_bytes(tmp_path):
    model_files.write_model_dir(tmp_path, META, TEXT)
    meta, text = model_files.read_model_dir(tmp_path)
    assert text == TEXT
    assert meta["model_sha256"] == hashlib.sha256(TEXT.encode()).hexdigest()
    assert meta["format"] == 2 and meta["model_text_version"] == "v4" and meta["version"] == "7"


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: (d / MODEL_FILE).write_text(TEXT[:-5]), "does not match"),
        (lambda d: (d / MODEL_FILE).write_text(TEXT + "Tree=1\n"), "does not match"),
        (lambda d: (d / METADATA_FILE).write_text('{"format": 2, "model_sha'), "cannot read"),
        (lambda d: (d / METADATA_FILE).write_text("[]"), "not a JSON object"),
        (lambda d: (d / METADATA_FILE).write_bytes(b"\xff\xfe"), "cannot read"),
        (lambda d: _edit_meta(d, format=1), "format 1"),
        (lambda d: _edit_meta(d, model_sha256=None), "does not match"),
        (lambda d: _edit_meta(d, model_text_version="v3"), "text format"),
        (lambda d: _edit_meta(d, feature_names=["a", "b"]), "feature names"),
        (lambda d: (d / MODEL_FILE).unlink(), "cannot read"),
    ],
)
def test_damaged_or_mismatched_folders_are_refused_before_parsing(tmp_path, damage, message):
    model_files.write_model_dir(tmp_path, META, TEXT)
    damage(tmp_path)
    with pytest.raises(ModelFileError, match=message):
        model_files.read_model_dir(tmp_path)


def _edit_meta(folder: Path, **changes):
    meta = json.loads((folder / METADATA_FILE).read_text())
    meta.update(changes)
    (folder / METADATA_FILE).write_text(json.dumps(meta))


def test_a_file_of_the_right_hash_but_another_text_version_is_refused(tmp_path):
    other = TEXT.replace("version=v4", "version=v5")
    model_files.write_model_dir(tmp_path, META, other)
    with pytest.raises(ModelFileError, match="'v5'"):
        model_files.read_model_dir(tmp_path)


def test_atomic_write_replaces_the_folder_as_one_unit_and_leaves_no_temporaries(tmp_path):
    dest = tmp_path / "models"
    model_files.write_model_dir(dest, META, TEXT)
    (dest / "stale.txt").write_text("from the old export")
    new_text = TEXT + "Tree=1\nnum_leaves=1\n"
    model_files.write_model_dir_atomically(dest, {**META, "version": "8"}, new_text)
    meta, text = model_files.read_model_dir(dest)
    assert text == new_text and meta["version"] == "8"
    assert sorted(p.name for p in dest.iterdir()) == [METADATA_FILE, MODEL_FILE]  # the old folder is gone
    assert sorted(p.name for p in tmp_path.iterdir()) == ["models"]  # no models.tmp-*/ or models.old-*/


def test_atomic_write_into_a_new_folder_and_a_failed_write_leaves_the_old_one(tmp_path):
    dest = tmp_path / "fresh" / "models"
    model_files.write_model_dir_atomically(dest, META, TEXT)
    assert model_files.read_model_dir(dest)[1] == TEXT
    with pytest.raises(TypeError):  # metadata that cannot be serialised fails mid-write
        model_files.write_model_dir_atomically(dest, {**META, "bad": object()}, TEXT + "x")
    assert model_files.read_model_dir(dest)[1] == TEXT
    assert sorted(p.name for p in dest.parent.iterdir()) == ["models"]


def test_the_fallback_rename_path_also_swaps_whole_folders(tmp_path, monkeypatch):
    """Where renameat2 is missing, the folder is renamed aside, then the new one into place."""
    asked: list[tuple[Path, Path]] = []
    monkeypatch.setattr(model_files, "_exchange", lambda a, b: asked.append((a, b)) or False)
    dest = tmp_path / "models"
    model_files.write_model_dir(dest, META, TEXT)
    model_files.write_model_dir_atomically(dest, {**META, "version": "9"}, TEXT + "y")
    assert [b for _, b in asked] == [dest]  # the exchange was tried, refused, and the renames did it
    assert model_files.read_model_dir(dest)[0]["version"] == "9"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["models"]


def test_the_shipped_model_is_migrated_and_verifies():
    meta, text = model_files.read_model_dir(SHIPPED)
    assert meta["model_sha256"] == hashlib.sha256((SHIPPED / MODEL_FILE).read_bytes()).hexdigest()
    assert meta["format"] == model_files.METADATA_FORMAT and text.startswith("tree\nversion=v4\n")


# --- through `perfmodel predict` ---------------------------------------------------------------


def _predict(model_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "perfmodel",
            "predict",
            "--config",
            str(EXAMPLE),
            "--model-dir",
            str(model_dir),
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


def _truncate(fraction: float):
    def damage(folder: Path) -> None:
        data = (folder / MODEL_FILE).read_bytes()
        (folder / MODEL_FILE).write_bytes(data[: int(len(data) * fraction)])

    return damage


@pytest.mark.parametrize(
    "damage",
    [
        _truncate(0.0),
        _truncate(0.3),
        _truncate(0.9999),
        lambda d: (d / METADATA_FILE).write_text((d / METADATA_FILE).read_text()[:5000]),
        lambda d: _edit_meta(d, model_sha256="0" * 64),  # metadata of another model
        lambda d: _edit_meta(d, format=1),  # an export from before the hash
    ],
    ids=[
        "empty",
        "trunc-30pct",
        "trunc-last-byte",
        "meta-cut",
        "meta-hash",
        "meta-v1",
    ],
)
@pytest.mark.slow
def test_predict_falls_back_to_the_analytic_model_instead_of_crashing(tmp_path, damage):
    folder = tmp_path / "models"
    shutil.copytree(SHIPPED, folder)
    damage(folder)
    res = _predict(folder)
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr and "Fatal" not in res.stderr
    lines = [line for line in res.stderr.splitlines() if FALLBACK in line]
    assert len(lines) == 1, res.stderr
    out = json.loads(res.stdout)
    assert out["model"]["kind"] == "analytic"


@pytest.mark.slow
def test_predict_uses_an_intact_copy_of_the_shipped_model(tmp_path):
    """The control of the test above: the same copy, undamaged, is used as the learned model."""
    folder = tmp_path / "models"
    shutil.copytree(SHIPPED, folder)
    res = _predict(folder)
    assert res.returncode == 0, res.stderr
    assert FALLBACK not in res.stderr
    assert json.loads(res.stdout)["model"]["kind"] == "learned"
