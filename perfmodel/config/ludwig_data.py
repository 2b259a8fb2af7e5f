"""What Ludwig learns from the data before it builds the model: category vocabularies, and text
tokenized by Ludwig's own tokenizers with a vocabulary built from the data (`--dataset`).

Ludwig 0.17 (ludwig/utils/tokenizers.py, ludwig/utils/strings_utils.py: create_vocabulary,
ludwig/features/text_feature.py), checked against the lab's runs (issue 16 phase 1):
- `space_punct` (the text default): a token is a run of letters, digits or '_' (str.isalnum), or
  one punctuation character; case is kept (lowercase false). `space`: split on whitespace.
- text vocabulary: the distinct tokens (at most `most_common`, default 20,000) + 4 special symbols
  (<PAD>, <UNK>, <SOS>, <EOS>); sequences get start and stop symbols (+2) and are padded to the
  longest, capped at `max_sequence_length` (default 256).
- category vocabulary: the distinct values (at most `most_common`, default 10,000); a dense
  category encoder embeds into min(vocabulary, embedding_size) dimensions.
- Hugging Face tokenizers (LLMs, pretrained encoders): the model's own tokenizer.json when it is on
  disk (a local folder); otherwise None (the caller falls back to characters / 4 and says so).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfmodel.config.dataset_size import _check_regular_file, _iter_values, _schema, dataset_format
from perfmodel.errors import ConfigError, clip

TEXT_SPECIAL_SYMBOLS = 4
"""<PAD>, <UNK>, <SOS>, <EOS> in every text vocabulary Ludwig builds with its own tokenizers."""
SEQUENCE_START_STOP = 2
"""Start and stop symbols added to each tokenized text."""


def space_punct(text: str) -> list[str]:
    """Ludwig's `space_punct` tokenizer (SpacePunctuationStringToListTokenizer)."""
    tokens: list[str] = []
    word: list[str] = []
    for c in text:
        if c.isalnum() or c == "_":
            word.append(c)
            continue
        if word:
            tokens.append("".join(word))
            word = []
        if not c.isspace():
            tokens.append(c)
    if word:
        tokens.append("".join(word))
    return tokens


def tokenize(text: str, tokenizer: str) -> list[str] | None:
    """Tokens by one of Ludwig's own tokenizers, or None for one perfmodel does not replicate."""
    if tokenizer == "space_punct":
        return space_punct(text)
    if tokenizer in ("space", "characters"):
        return text.split() if tokenizer == "space" else list(text)
    if tokenizer == "comma":
        return [t.strip() for t in text.split(",") if t.strip()]
    return None


@dataclass(frozen=True, kw_only=True)
class TextStats:
    """One text column as Ludwig's own tokenizer sees it."""

    tokenizer: str
    vocab_size: int
    """Distinct tokens (capped at most_common) + the special symbols."""
    longest_tokens: int
    """Tokens of the longest row (without start / stop)."""
    mean_tokens: float
    """Mean tokens per row (without start / stop)."""

    def padded_length(self, cap: int) -> int:
        return max(1, min(cap, self.longest_tokens + SEQUENCE_START_STOP))


@dataclass(frozen=True, kw_only=True)
class LudwigData:
    """What Ludwig learns from a dataset (for the columns asked)."""

    path: Path
    rows: int
    categories: dict[str, int] = field(default_factory=dict)
    """Column -> distinct values."""
    texts: dict[str, TextStats] = field(default_factory=dict)
    """Column -> Ludwig-tokenized statistics."""


def measure_ludwig_data(
    path: str | Path, *, categories: dict[str, int], texts: dict[str, tuple[str, int]]
) -> LudwigData:
    """Read `path` once: distinct values of each category column (capped at its most_common) and
    Ludwig's tokenization of each text column ({column: (tokenizer, most_common)}). Columns not in the
    file, and text columns whose tokenizer perfmodel does not replicate, are left out (the caller assumes)."""
    p = Path(path).expanduser()
    _check_regular_file(p)
    fmt = dataset_format(p)
    present = set(_schema(p, fmt)[0])
    categories = {
        c: v for c, v in categories.items() if c in present
    }  # an absent column: the caller's assumption
    texts = {c: v for c, v in texts.items() if c in present and tokenize("", v[0]) is not None}
    cols = list(dict.fromkeys([*categories, *texts]))
    distinct: dict[str, set[str]] = {c: set() for c in categories}
    counts: dict[str, Counter[str]] = {c: Counter() for c in texts}
    longest: dict[str, int] = dict.fromkeys(texts, 0)
    total: dict[str, int] = dict.fromkeys(texts, 0)
    rows = 0
    try:
        for n, values in _iter_values(p, fmt, cols):
            rows += n
            for c in cols:
                vals = values[c]
                seq = vals.to_pylist() if hasattr(vals, "to_pylist") else list(vals)
                if c in distinct:
                    distinct[c].update(str(v) for v in seq if v is not None and v == v and str(v) != "")
                if c in counts:
                    kind = texts[c][0]
                    for v in seq:
                        toks = tokenize("" if v is None or v != v else str(v), kind) or []
                        counts[c].update(toks)
                        longest[c] = max(longest[c], len(toks))
                        total[c] += len(toks)
    except (KeyError, ValueError) as exc:
        missing = [c for c in cols if c in str(exc)]
        raise ConfigError(
            f"dataset {clip(str(p))}: column {missing[0] if missing else cols} (named by the Ludwig "
            f"config's features) is not in the file"
        ) from None
    cats = {c: min(len(v), categories[c]) for c, v in distinct.items()}
    stats = {
        c: TextStats(
            tokenizer=texts[c][0],
            vocab_size=min(len(counts[c]), texts[c][1]) + TEXT_SPECIAL_SYMBOLS,
            longest_tokens=longest[c],
            mean_tokens=total[c] / max(rows, 1),
        )
        for c in texts
    }
    return LudwigData(path=p, rows=rows, categories=cats, texts=stats)


def local_tokenizer(name_or_path: str, base_dir: Path | None) -> Any:
    """The `tokenizers.Tokenizer` of a model folder on disk (tokenizer.json), or None."""
    for root in (Path(name_or_path).expanduser(), (base_dir or Path.cwd()) / name_or_path):
        candidate = root / "tokenizer.json"
        if candidate.is_file():
            try:
                from tokenizers import Tokenizer

                return Tokenizer.from_file(str(candidate))
            except Exception:  # noqa: BLE001 - no tokenizers package, or an unreadable file: fall back
                return None
    return None


def hf_token_counts(path: str | Path, tokenizer: Any, columns: list[str]) -> list[list[int]]:
    """Per column, the tokens of each row by a Hugging Face tokenizer (special tokens as it adds them)."""
    p = Path(path).expanduser()
    fmt = dataset_format(p)
    out: list[list[int]] = [[] for _ in columns]
    for _, values in _iter_values(p, fmt, columns):
        for i, c in enumerate(columns):
            vals = values[c]
            seq = vals.to_pylist() if hasattr(vals, "to_pylist") else list(vals)
            texts = ["" if v is None or v != v else str(v) for v in seq]
            out[i].extend(len(e.ids) for e in tokenizer.encode_batch(texts))
    return out
