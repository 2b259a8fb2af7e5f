"""`perfmodel predict` starts without pandas: the learned model's one-row path gives LightGBM a
numpy array of category codes (`features.feature_matrix`), and that path predicts exactly what
LightGBM predicts from the pandas DataFrame (`features.feature_frame`) it is given in training
and evaluation. The oracle for the codes is pandas itself; for the predictions, LightGBM's own
DataFrame handling."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "llama2-7b-lora.yaml"
FEATURES = ROOT / "datasets" / "features.parquet"
HEAVY = ("pandas", "pyarrow", "sklearn", "torch", "mlflow")


def _shipped():
    from perfmodel.learn.shipped import load_shipped_model

    return load_shipped_model()


needs_model = pytest.mark.skipif(_shipped() is None, reason="no model exported into models/")
needs_table = pytest.mark.skipif(not FEATURES.is_file(), reason="no datasets/features.parquet")


@pytest.mark.slow
@needs_model
def test_perfmodel_predict_does_not_import_pandas():
    code = (
        "import sys\n"
        "from perfmodel.cli import main\n"
        "try:\n"
        f"    main(['predict', '--config', {str(EXAMPLE)!r}, '--json'])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        f"print(sorted(m for m in {HEAVY + ('lightgbm',)!r} if m in sys.modules), file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["model"]["kind"] == "learned"  # the learned model did predict
    loaded = out.stderr.strip().splitlines()[-1]
    assert loaded == "['lightgbm']", f"perfmodel predict imported {loaded}"


@pytest.fixture(scope="module")
def table_rows():
    """(workload, analytic estimate, includes_optimizer_step) of every usable feature-table row,
    and the training frame `rows_to_training_data` builds from the same table."""
    import pandas as pd

    from perfmodel.analytic import estimate
    from perfmodel.codec import is_missing
    from perfmodel.features import rows_to_training_data, workload_from_row

    X, _, kept, _ = rows_to_training_data(pd.read_parquet(FEATURES))
    items = []
    for row in kept.to_dict("records"):
        w = workload_from_row(row)
        opt = row.get("includes_optimizer_step")
        items.append((w, estimate(w), True if is_missing(opt) else bool(opt)))
    return items, X


@needs_table
@pytest.mark.slow
def test_feature_codes_are_the_codes_pandas_gives(table_rows):
    import pandas as pd

    from perfmodel.features import CATEGORY_LEVELS, FEATURE_NAMES, feature_matrix, feature_vector

    items, X = table_rows
    rows = [feature_vector(w, e, includes_optimizer_step=o) for w, e, o in items]
    M = feature_matrix(rows)
    assert M.shape == (len(X), len(FEATURE_NAMES)) and M.dtype == np.float64
    for j, name in enumerate(FEATURE_NAMES):
        if name in CATEGORY_LEVELS:
            codes = pd.Categorical([r[name] for r in rows], categories=list(CATEGORY_LEVELS[name])).codes
            expected = np.where(codes < 0, np.nan, codes.astype(float))
        else:
            expected = X[name].to_numpy(dtype=float)
        np.testing.assert_array_equal(M[:, j], expected, err_msg=name)


@pytest.mark.slow
@needs_model
@needs_table
def test_numpy_path_predicts_exactly_what_the_dataframe_path_does(table_rows):
    from perfmodel.features import feature_vector

    items, X = table_rows
    model = _shipped()
    rows = [feature_vector(w, e, includes_optimizer_step=o) for w, e, o in items]
    assert len(rows) > 1000 and (X["vendor"].astype(str) == "cpu").any()  # both boosters are used
    from_frame = model.predict_log_ratio(X)
    from_rows = model.predict_log_ratio_rows(rows)
    np.testing.assert_array_equal(from_rows, from_frame)


@pytest.mark.slow
@needs_model
@needs_table
def test_correct_equals_correct_frame_with_intervals_and_warnings(table_rows):
    from perfmodel.features import feature_frame
    from perfmodel.learn.shipped import query_for

    items, _ = table_rows
    model = _shipped()
    pairs = [(w, e) for w, e, _ in items]
    X = feature_frame((w, e, True) for w, e in pairs)
    queries = [query_for(w, rec) for (w, _), rec in zip(pairs, X.to_dict("records"), strict=True)]
    by_frame = model.correct_frame(X, queries, 0.9)
    by_rows = model.correct(pairs, 0.9)
    assert by_rows == by_frame
    assert any(c.warnings for c in by_rows)  # the comparison covers widened, warned rows too


@needs_model
@pytest.mark.filterwarnings("ignore:Constructing a Categorical")  # pandas: unknown levels become NaN
def test_unknown_levels_are_missing_in_both_paths():
    import pandas as pd

    from perfmodel.analytic import estimate
    from perfmodel.catalog import get_gpu, get_model
    from perfmodel.features import FEATURE_NAMES, categorize, feature_matrix, feature_vector
    from perfmodel.workload import ParallelSpec, TrainingSpec, Workload

    model = _shipped()
    rows = []
    for gpu in ("A100-80GB", "H100-SXM", "cpu"):
        w = Workload(
            model=get_model("llama2-7b"),
            training=TrainingSpec(lora_r=16),
            gpu=get_gpu(gpu),
            parallel=ParallelSpec(),
        )
        rows.append(feature_vector(w, estimate(w)))
    rows[0] = {**rows[0], "arch": "state-space", "strategy": None}
    rows[1] = {**rows[1], "vendor": "acme", "attention_kernel": "ring"}
    M = feature_matrix(rows)
    for i, name in ((0, "arch"), (0, "strategy"), (1, "vendor"), (1, "attention_kernel")):
        assert math.isnan(M[i, FEATURE_NAMES.index(name)]), name
    frame = categorize(pd.DataFrame(rows, columns=list(FEATURE_NAMES)))
    np.testing.assert_array_equal(model.predict_log_ratio_rows(rows), model.predict_log_ratio(frame))


def _recoded(shipped, name: str, change, cpu_only: bool):
    """The shipped model with the stored levels of categorical feature `name` changed by
    `change` in both boosters' text, or in the CPU booster's only."""
    from perfmodel.learn.devices import CPU_MARKER
    from perfmodel.learn.shipped import LearnedModel

    stored = shipped.booster.pandas_categorical
    names = [n for n in shipped.feature_names if n in shipped.category_levels()]
    new_levels = [list(levels) for levels in stored]
    new_levels[names.index(name)] = change(new_levels[names.index(name)])
    old, new = ("pandas_categorical:" + json.dumps(x) for x in (stored, new_levels))
    head, sep, tail = shipped.model_text.partition(CPU_MARKER)
    assert old in head and (not cpu_only or old in tail)
    text = (head if cpu_only else head.replace(old, new)) + sep + tail.replace(old, new)
    model = LearnedModel(None, shipped.metadata, model_text=text)
    changed = model.boosters[1] if cpu_only else model.boosters[0]
    assert model.category_levels(changed)[name] == new_levels[names.index(name)]
    return model


@pytest.mark.slow
@needs_model
@needs_table
def test_a_model_trained_before_a_level_was_appended_is_coded_as_lightgbm_does(table_rows):
    """Such a model stores the shorter level list; LightGBM re-codes a DataFrame to it (the new
    levels become missing), and the numpy path must code the same way."""
    from perfmodel.features import FEATURE_NAMES, feature_matrix, feature_vector

    shipped = _shipped()
    model = _recoded(shipped, "arch", lambda levels: levels[:-2], cpu_only=False)
    items, X = table_rows
    rows = [feature_vector(w, e, includes_optimizer_step=o) for w, e, o in items]
    np.testing.assert_array_equal(model.predict_log_ratio_rows(rows), model.predict_log_ratio(X))
    # rows whose level the old model lacks are coded differently from today's levels
    j = FEATURE_NAMES.index("arch")
    today = feature_matrix(rows)[:, j]
    old = feature_matrix(rows, levels=model.category_levels())[:, j]
    assert (np.isnan(old) & ~np.isnan(today)).any()


@pytest.mark.slow
@needs_model
@needs_table
@pytest.mark.parametrize("cpu_only", [False, True], ids=["both boosters", "CPU booster only"])
def test_codes_follow_each_boosters_stored_levels(table_rows, cpu_only):
    """Levels stored in another order (here: reversed) must be followed booster by booster."""
    from perfmodel.features import feature_matrix, feature_vector
    from perfmodel.learn.devices import predict_by_device

    shipped = _shipped()
    if cpu_only and shipped.boosters[1] is None:
        pytest.skip("the shipped model has no CPU booster")
    model = _recoded(shipped, "arch", lambda levels: levels[::-1], cpu_only=cpu_only)
    items, X = table_rows
    rows = [feature_vector(w, e, includes_optimizer_step=o) for w, e, o in items]
    by_frame = model.predict_log_ratio(X)
    np.testing.assert_array_equal(model.predict_log_ratio_rows(rows), by_frame)
    # this test can fail: coding with today's levels instead of the booster's changes predictions
    main, cpu = model.boosters
    is_cpu = np.array([r["vendor"] == "cpu" for r in rows])
    naive = predict_by_device(main, cpu, feature_matrix(rows, model.feature_names), cpu=is_cpu)
    assert (naive != by_frame).any()
