"""docs/memory.md's oracle-grid table is generated from the stored grid and the current model."""

from __future__ import annotations

from pathlib import Path

from perfmodel.memcheck import GRID_TABLE_BEGIN, GRID_TABLE_END, check_oracle_grid, grid_markdown

DOC = Path(__file__).resolve().parents[1] / "docs" / "memory.md"


def test_the_grid_table_in_docs_is_the_current_one():
    text = DOC.read_text(encoding="utf-8")
    assert GRID_TABLE_BEGIN in text and GRID_TABLE_END in text
    table = text.split(GRID_TABLE_BEGIN, 1)[1].split(GRID_TABLE_END, 1)[0].strip()
    assert table == grid_markdown(check_oracle_grid()), (
        "docs/memory.md's grid table is stale: regenerate it with perfmodel.memcheck.grid_markdown"
    )
