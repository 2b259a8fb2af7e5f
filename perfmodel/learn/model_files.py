"""Model files on disk: a folder holding `throughput.lgb.txt` (LightGBM's text format) and
`metadata.json` (calibration, training domain, provenance).

Reading never lets LightGBM see a file that is not exactly the one written with its metadata:
`metadata.json` records the model file's sha256, its LightGBM text-format version and the
metadata format, and `read_model_dir` checks all three (plus the feature names) *before* any
LightGBM parsing. LightGBM aborts the whole process (a segfault, exit 139, "[Fatal] Model format
error") on a truncated model file, so a damaged or mismatched folder must be refused here, with
a `ModelFileError` the predictor turns into a warning and the analytic fallback.

Writing is all-or-nothing (`write_model_dir_atomically`): both files go into a temporary sibling
folder `<dest>.tmp-XXXX/`, are flushed to disk, and the folder is then swapped with `dest` in one
`renameat2(RENAME_EXCHANGE)` call on Linux (an atomic exchange of two directory entries); where
that call is missing (other systems, old libc), `dest` is renamed aside and the new folder renamed
into place (two renames: a reader in between sees no model and falls back to the analytic one;
it never sees one file of each version). The old folder is then deleted.

No numpy, pandas or LightGBM here.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from perfmodel.errors import DataError

MODEL_FILE = "throughput.lgb.txt"
METADATA_FILE = "metadata.json"
METADATA_FORMAT = 2
"""Metadata format written and read. 2 added `model_sha256` and `model_text_version`; format 1
folders (no hash) are refused: re-export them from the registry or retrain."""
MODEL_TEXT_VERSIONS = ("v4",)
"""LightGBM text-format versions this code reads (the `version=` line of the model file)."""


class ModelFileError(DataError):
    """A model folder that is incomplete, damaged, or whose files do not belong together."""


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def model_text_version(text: str) -> str | None:
    """The `version=` value in the header of a LightGBM text model, or None."""
    for line in text.splitlines()[:4]:
        if line.startswith("version="):
            return line[len("version=") :].strip()
    return None


def _model_feature_names(text: str) -> list[str] | None:
    for line in text.splitlines()[:12]:
        if line.startswith("feature_names="):
            return line[len("feature_names=") :].split()
    return None


def has_model(path: str | Path) -> bool:
    """Both files are present (whether they are sound is `read_model_dir`'s question)."""
    path = Path(path)
    return (path / MODEL_FILE).is_file() and (path / METADATA_FILE).is_file()


def read_model_dir(path: str | Path) -> tuple[dict[str, Any], str]:
    """(metadata, model text) of a model folder, verified: metadata format, model sha256,
    LightGBM text version and feature names. Raises ModelFileError naming what is wrong."""
    path = Path(path)
    meta_path, model_path = path / METADATA_FILE, path / MODEL_FILE
    try:
        metadata = json.loads(meta_path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelFileError(f"cannot read {meta_path}: {exc}") from exc
    if not isinstance(metadata, dict):
        raise ModelFileError(f"{meta_path} is not a JSON object")
    if metadata.get("format") != METADATA_FORMAT:
        raise ModelFileError(
            f"{meta_path} has format {metadata.get('format')!r}, this perfmodel reads {METADATA_FORMAT}; "
            f"re-export the model (`perfmodel train --export`)"
        )
    try:
        data = model_path.read_bytes()
    except OSError as exc:
        raise ModelFileError(f"cannot read {model_path}: {exc}") from exc
    digest = sha256_bytes(data)
    if digest != metadata.get("model_sha256"):
        raise ModelFileError(
            f"{model_path} does not match {METADATA_FILE} (sha256 {digest[:12]}..., expected "
            f"{str(metadata.get('model_sha256'))[:12]}...): damaged, truncated or from another version"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:  # cannot happen for a hash match of a file we wrote
        raise ModelFileError(f"{model_path} is not text: {exc}") from exc
    version = model_text_version(text)
    if version not in MODEL_TEXT_VERSIONS or version != metadata.get("model_text_version"):
        raise ModelFileError(
            f"{model_path} is LightGBM text format {version!r} (metadata says "
            f"{metadata.get('model_text_version')!r}); this perfmodel reads {', '.join(MODEL_TEXT_VERSIONS)}"
        )
    if _model_feature_names(text) != list(metadata.get("feature_names") or []):
        raise ModelFileError(f"{model_path} and {METADATA_FILE} disagree on the feature names")
    return metadata, text


def stamp_metadata(metadata: Mapping[str, Any], model_text: str) -> dict[str, Any]:
    """`metadata` with the format, model hash and text version of `model_text` recorded."""
    return {
        **metadata,
        "format": METADATA_FORMAT,
        "model_sha256": sha256_bytes(model_text.encode("utf-8")),
        "model_text_version": model_text_version(model_text),
    }


def metadata_json(metadata: Mapping[str, Any]) -> str:
    """The canonical text of metadata.json (sorted keys, one-space indent, final newline)."""
    return json.dumps(metadata, indent=1, sort_keys=True) + "\n"


def _write_synced(path: Path, text: str) -> None:
    with path.open("w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def write_model_dir(path: str | Path, metadata: Mapping[str, Any], model_text: str) -> Path:
    """Write both files into `path` (created if needed), the metadata stamped with the model's
    hash. Not atomic: for a folder readers may be using, use `write_model_dir_atomically`."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    _write_synced(path / MODEL_FILE, model_text)
    _write_synced(path / METADATA_FILE, metadata_json(stamp_metadata(metadata, model_text)))
    return path


def _exchange(a: Path, b: Path) -> bool:
    """Atomically exchange two paths with renameat2(RENAME_EXCHANGE); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    rc = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    return rc == 0


def write_model_dir_atomically(dest: str | Path, metadata: Mapping[str, Any], model_text: str) -> Path:
    """Replace the model folder `dest` as one unit (see the module docstring)."""
    dest = Path(dest)
    if dest.is_symlink():  # replace what the link points to, keep the link
        dest = dest.resolve()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{dest.name}.tmp-", dir=dest.parent))
    try:
        write_model_dir(tmp, metadata, model_text)
        if dest.is_dir():
            os.chmod(tmp, dest.stat().st_mode & 0o7777)
            if not _exchange(tmp, dest):
                aside = Path(tempfile.mkdtemp(prefix=f"{dest.name}.old-", dir=dest.parent))
                aside.rmdir()
                dest.rename(aside)
                tmp.rename(dest)
                tmp = aside
        else:
            os.chmod(tmp, 0o755)
            tmp.rename(dest)  # nothing there (or a file, which rename refuses to replace by a dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # after a swap, tmp holds the old folder
    return dest
