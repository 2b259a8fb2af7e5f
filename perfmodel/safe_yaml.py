"""The one YAML loader: native configs, Ludwig configs, `--set` values and the catalog's data files
all go through it, so no input can hang perfmodel, exhaust its memory, or be read other than as
written.

Refused, each with a one-line `ConfigError` naming the file (and the line where there is one):
- anything but a regular file (a FIFO, /dev/zero, a directory, a socket): checked with `os.stat`
  before opening, and again on the descriptor, which is opened non-blocking so that a FIFO
  swapped in between cannot block;
- a file over `MAX_FILE_BYTES` (the read itself is bounded too: a file growing while read is cut);
- more than `MAX_ALIASES` alias nodes (`*name`), counted while the document is composed, or aliases
  that expand to more than `MAX_EXPANDED_NODES` nodes, or refer to themselves: a "billion laughs"
  bomb is refused before any of it is built;
- nesting deeper than `MAX_DEPTH` levels;
- a key written twice in one mapping, at any level (PyYAML silently keeps the last one): the error
  names the key's dotted path and both lines. Merge keys (`<<: *defaults`) may still be overridden;
- bytes that are not UTF-8, and anything else PyYAML's safe loader refuses (e.g. `!!python` tags).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from perfmodel import files
from perfmodel.errors import ConfigError, clip

MAX_FILE_BYTES = 1_000_000
"""Largest YAML file read, in bytes (1 MB; the largest real Ludwig config seen is ~10 kB)."""
MAX_ALIASES = 100
"""Most alias nodes (`*name`) one document may hold."""
MAX_EXPANDED_NODES = 100_000
"""Most nodes a document with aliases may expand to (aliases followed)."""
MAX_DEPTH = 100
"""Deepest nesting of sequences and mappings."""

def read_bounded(path: str | Path, *, what: str, limit_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit_bytes`; ConfigError (naming `what` and the
    path) for a missing, special, oversized or unreadable file. Never blocks on a FIFO or device
    (perfmodel.files.read_bounded, which run files use too)."""
    return files.read_bounded(path, what=what, limit_bytes=limit_bytes, error=ConfigError)


def read_yaml_file(path: str | Path, *, what: str = "config file") -> Any:
    """The document held by a YAML file (None when it is empty), read under every limit above."""
    p = Path(path).expanduser()
    data = read_bounded(p, what=what)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} {clip(str(p))} is not UTF-8 text (byte {exc.start})") from None
    return load_yaml_text(text, source=clip(str(p)))


def load_yaml_text(text: str, *, source: str, decimal_numbers: bool = False) -> Any:
    """The document of a YAML string (None when empty); `source` names it in errors. With
    `decimal_numbers` (command-line values), a number written in another base or with a leading
    zero is refused instead of read the YAML 1.1 way (`017` is 15, `0x100` 256, `1:30` 90)."""
    # PyYAML: only when YAML is read
    import yaml

    try:
        loader = _loader_class()(text, source)  # PyYAML's reader checks the characters here
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"{source} is not valid YAML: {clip(str(problem))}") from None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_tree(node, source, loader.aliases)
        if decimal_numbers:
            _check_decimal(node, source)
        return loader.construct_document(node)
    except ConfigError:
        raise
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
        raise ConfigError(f"{source} is not valid YAML{where}: {clip(problem)}") from None
    except (ValueError, TypeError, RecursionError, MemoryError) as exc:  # e.g. an int of 5,000 digits
        raise ConfigError(
            f"{source} cannot be read: {clip(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)}"
        ) from None
    finally:
        loader.dispose()


_LOADER: Any = None


def _loader_class() -> Any:
    """A SafeLoader that counts aliases and nesting while composing (built once, on first use)."""
    global _LOADER
    if _LOADER is not None:
        return _LOADER
    # PyYAML: only when YAML is read
    import yaml

    class BoundedLoader(yaml.SafeLoader):
        def __init__(self, stream: str, source: str) -> None:
            super().__init__(stream)
            self.source, self.aliases, self.depth = source, 0, 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                self.aliases += 1
                if self.aliases > MAX_ALIASES:
                    line = self.peek_event().start_mark.line + 1
                    raise ConfigError(
                        f"{self.source} has more than {MAX_ALIASES} YAML aliases (line {line}); "
                        f"write the values out"
                    )
            self.depth += 1
            try:
                if self.depth > MAX_DEPTH:
                    line = self.peek_event().start_mark.line + 1
                    raise ConfigError(f"{self.source} nests deeper than {MAX_DEPTH} levels (line {line})")
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    _LOADER = BoundedLoader
    return _LOADER


def _check_tree(root: Any, source: str, aliases: int) -> None:
    """Refuse duplicate keys (every mapping, once) and, when the document has aliases, an
    expansion that is cyclic, too large or too deep."""
    # PyYAML: only when YAML is read
    import yaml

    seen: set[int] = set()
    stack: list[tuple[Any, str]] = [(root, "")]
    while stack:
        node, path = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[tuple[str, str], int] = {}
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                    name = clip(key.value, 80) if len(key.value) > 78 else key.value
                    dotted = f"{path}.{name}" if path else name
                    ident = (key.tag, key.value)
                    if ident in first:
                        raise ConfigError(
                            f"{source}: duplicate key {dotted} at line {key.start_mark.line + 1} "
                            f"(first at line {first[ident]}); give each key once"
                        )
                    first[ident] = key.start_mark.line + 1
                    stack.append((value, dotted))
                else:
                    stack.append((value, path))
                stack.append((key, path))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, f"{path}[{i}]" if path else f"[{i}]") for i, item in enumerate(node.value))
    if aliases:
        _check_expansion(root, source)


_DECIMAL_INT = re.compile(r"[-+]?(0|[1-9][0-9_]*)")


def _check_decimal(root: Any, source: str) -> None:
    """ConfigError for a plain scalar YAML 1.1 reads as a number that is not written in decimal:
    a leading zero (octal), 0x / 0b / 0o, or base 60 (`1:30`)."""
    # PyYAML: only when YAML is read
    import yaml

    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            stack.extend(n for pair in node.value for n in pair)
        elif isinstance(node, yaml.ScalarNode) and node.style is None:
            value = node.value
            bad = (node.tag == "tag:yaml.org,2002:int" and not _DECIMAL_INT.fullmatch(value)) or (
                node.tag == "tag:yaml.org,2002:float" and ":" in value
            )
            if bad:
                raise ConfigError(
                    f"{source}: {clip(value, 40)} is not a decimal number (YAML would read it in base "
                    f"{_base(value)}); write it in decimal without leading zeros (or quote it if it is a name)"
                )


def _base(value: str) -> int:
    digits = value.lstrip("+-").lower()
    if ":" in digits:
        return 60
    return {"0x": 16, "0b": 2}.get(digits[:2], 8)


def _check_expansion(root: Any, source: str) -> None:
    """Size and height of the document with every alias followed, computed once per node."""
    # PyYAML: only when YAML is read
    import yaml

    size: dict[int, int] = {}
    height: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children: list[Any] = []
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        if done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            height[key] = 1 + max((height[id(c)] for c in children), default=0)
            if size[key] > MAX_EXPANDED_NODES:
                raise ConfigError(
                    f"{source}: its YAML aliases expand to more than {MAX_EXPANDED_NODES:,} values "
                    f"(line {node.start_mark.line + 1}); write the values out"
                )
            if height[key] > MAX_DEPTH:
                raise ConfigError(
                    f"{source}: its YAML aliases nest deeper than {MAX_DEPTH} levels "
                    f"(line {node.start_mark.line + 1})"
                )
            continue
        if key in size:
            continue
        if key in on_path:
            raise ConfigError(f"{source}: a YAML alias refers to itself (line {node.start_mark.line + 1})")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in size)
