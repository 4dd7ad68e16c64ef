"""YAML loading that remembers where each value was written, so errors can point at a line."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import yaml

Path = tuple[str | int, ...]


@dataclass
class Located:
    """Plain YAML data plus the line (1-based) of every mapping value and list item in it."""

    data: object
    lines: dict[Path, int] = field(default_factory=dict)

    def where(self, path: Path) -> str:
        """`physicalCells[0].cellChildren[1]`, with the line when the value came from a file."""
        text = format_path(path)
        line = self.lines.get(path)
        return f"{text} (line {line})" if line is not None else text


def format_path(path: Path) -> str:
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else part
    return text or "<top level>"


def load_located(text: str) -> Located:
    """Parse one YAML document; raise `yaml.YAMLError` (with its own line) when it is not YAML."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    lines: dict[Path, int] = {}
    if node is not None:
        _collect_lines(node, (), lines)
    return Located(data, lines)


def locate_mapping(data: Mapping[str, object]) -> Located:
    """Wrap data that did not come from a file (no lines to report)."""
    return Located(dict(data))


def _collect_lines(node: yaml.Node, path: Path, lines: dict[Path, int]) -> None:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                _collect_lines(value_node, (*path, str(key_node.value)), lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _collect_lines(item, (*path, index), lines)
