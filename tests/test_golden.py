"""`perfmodel predict --json` of every example config against its golden document (tests/golden/).

Numbers match at a relative tolerance of 1e-6 (tests/golden.py says why); every key, string and
flag exactly. When a change of the model moves the numbers on purpose, regenerate the files with

    .venv/bin/python -m tests.golden --update

and commit the diff of tests/golden/ with the change.
"""

from __future__ import annotations

import json

import pytest

from tests import golden


def test_every_example_has_a_golden_document_and_no_golden_document_is_orphaned():
    names = golden.example_names()
    assert len(names) >= 4
    assert sorted(p.name for p in golden.GOLDEN_DIR.glob("*.json")) == sorted(
        golden.golden_path(n).name for n in names
    )


@pytest.mark.parametrize("name", golden.example_names())
def test_predict_json_matches_the_golden_document(name):
    expected = json.loads(golden.golden_path(name).read_text())
    diffs = golden.differences(expected, golden.document(name))
    assert not diffs, (
        f"{len(diffs)} differences from {golden.golden_path(name).name} (regenerate with "
        f"`python -m tests.golden --update` if the change is meant):\n" + "\n".join(diffs[:20])
    )


def test_the_comparison_sees_a_moved_number_a_changed_word_and_a_missing_key():
    doc = {"a": {"estimate": 100.0, "low": 50.0}, "kind": "learned", "fits": True, "w": [1, 2]}
    assert golden.differences(doc, json.loads(json.dumps(doc))) == []
    assert golden.differences(doc, {**doc, "a": {"estimate": 100.0 * (1 + 1e-7), "low": 50.0}}) == []
    assert golden.differences(doc, {**doc, "a": {"estimate": 100.001, "low": 50.0}}) == [
        "a.estimate: 100.0 -> 100.001"
    ]
    assert golden.differences(doc, {**doc, "kind": "analytic"}) == ["kind: 'learned' -> 'analytic'"]
    assert golden.differences(doc, {**doc, "fits": 1}) == ["fits: True -> 1"]
    assert golden.differences(doc, {k: v for k, v in doc.items() if k != "w"}) == [".w: missing"]
    assert golden.differences(doc, {**doc, "w": [1]}) == ["w: 2 items -> 1: [1]"]
