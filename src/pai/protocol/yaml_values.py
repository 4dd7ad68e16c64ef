"""YAML nodes to plain Python values, remembering where in the text each value came from.

Values are built here, not by PyYAML's constructor, so that a duplicate key is an error (PyYAML
keeps the last one silently), only plain data tags are accepted, and every field path can be
traced back to its line and column when validation fails further on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from yaml.constructor import SafeConstructor
from yaml.error import Mark
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from pai.protocol.base import describe_value
from pai.protocol.errors import Problem
from pai.protocol.yaml_tree import Position, position_of

Path = tuple[Any, ...]
"""A field path: mapping keys and list indexes from the document root."""

_TAG = "tag:yaml.org,2002:"
_MERGE = _TAG + "merge"
_NOT_MERGEABLE = "'<<' can only merge mappings into a mapping"


def _join(dotted: str, item: Any, *, index: bool) -> str:
    if index:
        return f"{dotted}[{item}]"
    return f"{dotted}.{item}" if dotted else str(item)


class SourceMap:
    """Where each value of a document sits in the text, by field path.

    Only the parser's marks are kept for each value; positions and dotted paths are worked out
    when a problem is reported, since a valid job (the usual case) never needs them."""

    def __init__(self) -> None:
        # path -> (mark of its key or None, mark of its value, whether it is a list item)
        self._entries: dict[Path, tuple[Mark | None, Mark, bool]] = {}

    def record(self, path: Path, key: Mark | None, value: Mark, *, index: bool) -> None:
        self._entries[path] = (key, value, index)

    def dotted(self, path: Path) -> str:
        """The path as users read it: `taskRoles.worker.commands[0]`."""
        dotted = ""
        for length, item in enumerate(path, start=1):
            entry = self._entries.get(path[:length])
            index = entry[2] if entry else isinstance(item, int) and not isinstance(item, bool)
            dotted = _join(dotted, item, index=index)
        return dotted

    def position(self, path: Path, *, of_key: bool = False) -> Position | None:
        """Where the value at `path` starts, or with `of_key` the key that introduces it.

        A path not in the document (a missing field) is placed at its nearest enclosing value.
        """
        for length in range(len(path), -1, -1):
            entry = self._entries.get(path[:length])
            if entry is not None:
                key, value, _ = entry
                return position_of(key if of_key and key is not None else value)
        return None

    def problem(self, path: Path, message: str, *, of_key: bool = False) -> Problem:
        """A problem about the value at `path`, located in the text."""
        where = self.position(path, of_key=of_key)
        return Problem(
            path=self.dotted(path),
            message=message,
            line=where.line if where else None,
            column=where.column if where else None,
        )


@dataclass
class LoadedDocument:
    """A document's values, their source map, and the problems met while building them.

    `rejected` holds the dotted paths of values that could not be built and stand as null.
    """

    data: Any
    sources: SourceMap
    problems: list[Problem]
    rejected: set[str]


def _unsupported(tag: str) -> str:
    shown = "!!" + tag.removeprefix(_TAG) if tag.startswith(_TAG) else tag
    return f"the YAML tag {shown} is not supported in a job file"


def _plain_int(text: str) -> int | None:
    """`text` as an int if it is plain decimal digits (most ints of a job file), else None for
    PyYAML to read (signs, `_`, `0x`, `0o`, YAML 1.1's leading-zero octal and base 60)."""
    if text.isascii() and text.isdigit() and text[0] != "0":
        return int(text)
    return None


class _Invalid:
    """Stands for a key that could not be built; its entry is skipped."""


_INVALID = _Invalid()


class _Builder:
    def __init__(self) -> None:
        self.sources = SourceMap()
        self.problems: list[Problem] = []
        self.rejected: set[str] = set()
        self._scalars = SafeConstructor()

    def _reject(self, node: Node, path: Path, message: str) -> None:
        self._report(node, path, message)
        self.rejected.add(self.sources.dotted(path))

    def _report(self, node: Node, path: Path, message: str) -> None:
        where = position_of(node.start_mark)
        self.problems.append(
            Problem(self.sources.dotted(path), message, line=where.line, column=where.column)
        )

    def value(self, node: Node, path: Path, key: Mark | None, *, index: bool = False) -> Any:
        self.sources.record(path, key, node.start_mark, index=index)
        if isinstance(node, ScalarNode):
            return self.scalar(node, path)
        if isinstance(node, SequenceNode) and node.tag == _TAG + "seq":
            return [
                self.value(item, (*path, number), None, index=True)
                for number, item in enumerate(node.value)
            ]
        if isinstance(node, MappingNode) and node.tag == _TAG + "map":
            return self.mapping(node, path)
        self._reject(node, path, _unsupported(node.tag))
        return None

    def scalar(self, node: ScalarNode, path: Path) -> Any:
        tag = node.tag
        try:
            if tag == _TAG + "str":
                if "\x00" in node.value:  # a "\0" or "\u0000" escape; no store keeps it
                    self._reject(node, path, "text may not contain the NUL character (U+0000)")
                    return None
                return node.value
            if tag == _TAG + "null":
                return None
            if tag == _TAG + "bool":
                return self._scalars.construct_yaml_bool(node)
            if tag == _TAG + "int":
                return _plain_int(node.value) or self._scalars.construct_yaml_int(node)
            if tag == _TAG + "float":
                return self._scalars.construct_yaml_float(node)
        except (ValueError, KeyError):
            # The value itself is not repeated: it could be a secret.
            self._reject(node, path, f"the value is not a valid !!{tag.removeprefix(_TAG)}")
            return None
        if tag == _TAG + "timestamp":
            # No field of the protocol is a date; keep what the user wrote (`version: 2024-05-01`).
            return node.value
        self._reject(node, path, _unsupported(tag))
        return None

    def mapping(self, node: MappingNode, path: Path) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        written: dict[Any, Mark] = {}
        for key_node, value_node, merged in self._pairs(node, path):
            key = self._key(key_node, path)
            if isinstance(key, _Invalid):
                continue
            key_mark = key_node.start_mark
            if not merged:
                first = written.get(key)
                if first is not None:
                    self._report(
                        key_node,
                        (*path, key),
                        f"duplicate key {describe_value(key)} "
                        f"(first written on line {position_of(first).line})",
                    )
                    continue
                written[key] = key_mark
            result[key] = self.value(value_node, (*path, key), key_mark)
        return result

    def _key(self, node: Node, path: Path) -> Any:
        if not isinstance(node, ScalarNode):
            self._report(
                node, path, "a key must be a plain value such as a name, not a list or mapping"
            )
            return _INVALID
        key = self.scalar(node, path)
        return _INVALID if key is None and node.tag != _TAG + "null" else key

    def _pairs(self, node: MappingNode, path: Path) -> list[tuple[Node, Node, bool]]:
        return merged_pairs(node, lambda source: self._report(source, path, _NOT_MERGEABLE))


def merged_pairs(
    node: MappingNode, on_unmergeable: Callable[[Node], None] | None = None
) -> list[tuple[Node, Node, bool]]:
    """A mapping's entries as (key, value, merged); `<<` merges come first so written keys win."""
    merged: list[tuple[Node, Node, bool]] = []
    written: list[tuple[Node, Node, bool]] = []
    for key_node, value_node in node.value:
        if key_node.tag != _MERGE:
            written.append((key_node, value_node, False))
            continue
        sources = value_node.value if isinstance(value_node, SequenceNode) else [value_node]
        # Of several merged mappings the first wins, so it is spliced in last.
        for source in reversed(sources):
            if isinstance(source, MappingNode):
                merged.extend((k, v, True) for k, v, _ in merged_pairs(source, on_unmergeable))
            elif on_unmergeable is not None:
                on_unmergeable(source)
    return merged + written


def build_values(root: Node) -> LoadedDocument:
    """The plain values of a composed document (see `yaml_tree.compose_document`)."""
    builder = _Builder()
    data = builder.value(root, (), None)
    return LoadedDocument(
        data=data, sources=builder.sources, problems=builder.problems, rejected=builder.rejected
    )
