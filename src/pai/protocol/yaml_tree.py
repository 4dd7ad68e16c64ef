"""Job text to a YAML node tree, with limits that hold before any value is built.

The tree is composed from the parser's event stream here rather than by PyYAML's composer, for
two reasons: PyYAML's composers recurse once per nesting level (the C one can overflow the C
stack on a deeply nested document), and an alias bomb must be stopped while composing, not after
its expansion has been built. Every node's expanded size and depth is known the moment it is
closed, so a billion-laughs document stops at the first node that crosses the limit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import yaml
from yaml.error import Mark
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

from pai.protocol.errors import Problem, ProtocolError

MAX_DOCUMENT_BYTES = 1024 * 1024
"""Largest job text accepted, in bytes of UTF-8."""

MAX_NODES = 100_000
"""Most YAML nodes a document may expand to, counting every use of an alias in full."""

MAX_DEPTH = 100
"""Deepest nesting of mappings and lists, again counting what aliases expand to."""

MAX_EXPANDED_CHARACTERS = 4 * MAX_DOCUMENT_BYTES
"""Most characters the document's scalars may add up to, counting every use of an alias in
full: a few large scalars used through thousands of aliases stay within MAX_NODES, yet make a
job of gigabytes once it is written out (to the store, into a task's script)."""

_EventParser = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_REMEMBERED_TAGS = 4096
"""Scalars whose implicit tags `_LibyamlComposer` remembers (the memo is emptied when full)."""
_REMEMBERED_LENGTH = 64
"""Longer scalars (commands, scripts) are resolved each time: they rarely repeat."""


class _LibyamlComposer(_EventParser):  # type: ignore[misc,valid-type]
    """libyaml's composer, remembering the implicit tag of each short scalar.

    The composer asks the resolver for every scalar's tag, which tries regular expressions on
    it; the tag depends only on the text, and job files repeat the same keys and values. PAI
    adds no path resolvers, so the composer's walk need not be followed for them."""

    _tags: dict[tuple[type[Node], str, tuple[bool, bool]], str] = {}

    def resolve(self, kind: type[Node], value: str | None, implicit: tuple[bool, bool]) -> str:
        if value is None or len(value) > _REMEMBERED_LENGTH:  # a collection, or a long text
            return str(super().resolve(kind, value, implicit))
        key = (kind, value, implicit)
        tag = self._tags.get(key)
        if tag is None:
            tag = str(super().resolve(kind, value, implicit))
            if len(self._tags) >= _REMEMBERED_TAGS:
                self._tags.clear()
            self._tags[key] = tag
        return tag

    def descend_resolver(self, current_node: Node | None, current_index: object) -> None:
        """No path resolvers: nothing to follow."""

    def ascend_resolver(self) -> None:
        """No path resolvers: nothing to follow."""


@dataclass(frozen=True)
class Position:
    """A place in the text: 1-based line and column, 0-based character offset."""

    line: int
    column: int
    index: int


def position_of(mark: Mark) -> Position:
    """The position a PyYAML mark points at."""
    return Position(line=mark.line + 1, column=mark.column + 1, index=mark.index)


def _marks(event: yaml.Event) -> tuple[Mark, Mark]:
    """The event's start and end marks (the C parser's marks have the same fields as PyYAML's)."""
    return cast(Mark, event.start_mark), cast(Mark, event.end_mark)


def _position_at(text: str, index: int) -> Position:
    line_start = text.rfind("\n", 0, index) + 1
    return Position(line=text.count("\n", 0, index) + 1, column=index - line_start + 1, index=index)


def _fail(message: str, where: Position | None) -> ProtocolError:
    line, column = (where.line, where.column) if where else (None, None)
    return ProtocolError([Problem(path="", message=message, line=line, column=column)])


def decode_job_text(raw: str | bytes) -> str:
    """The job as text, checked to be valid UTF-8 and within the size limit."""
    if isinstance(raw, bytes):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            prefix = raw[: exc.start].decode("utf-8", errors="replace")
            raise _fail("the file is not UTF-8 text", _position_at(prefix, len(prefix))) from None
    else:
        text = raw
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise _fail(
            "the text contains an invalid character", _position_at(text, exc.start)
        ) from None
    if size > MAX_DOCUMENT_BYTES:
        raise _fail(
            f"the document is {size} bytes long; a job may be at most {MAX_DOCUMENT_BYTES} bytes "
            "(1 MiB)",
            None,
        )
    return text


@dataclass
class _OpenCollection:
    node: SequenceNode | MappingNode
    anchor: str | None
    size: int = 1
    depth: int = 1
    characters: int = 0
    pending_key: Node | None = None
    pairs: list[tuple[Node, Node]] = field(default_factory=list)
    items: list[Node] = field(default_factory=list)


class _Composer:
    """Builds the node tree of a single document from parser events, enforcing the limits."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._resolver = Resolver()
        # anchor -> (node, its expanded size, depth and characters)
        self._anchors: dict[str, tuple[Node, int, int, int]] = {}
        self._open: list[_OpenCollection] = []
        self._open_size = 0
        """The expanded size of the open collections so far (the sum of their sizes)."""
        self._open_characters = 0
        """The characters of the scalars in the open collections so far, expanded."""
        self._documents = 0
        self.root: Node | None = None

    def compose(self, parser: type[yaml.SafeLoader] = _EventParser) -> Node | None:
        try:
            for event in yaml.parse(self._text, Loader=parser):
                self._handle(event)
        except yaml.MarkedYAMLError as exc:
            if _is_nesting_refusal(exc):
                if parser is not yaml.SafeLoader:
                    raise _ParserNestingLimit from None
                raise _fail(_too_deep(), _mark_position(exc)) from None
            raise _fail(_describe_yaml_error(exc), _mark_position(exc)) from None
        except yaml.reader.ReaderError as exc:
            raise _fail(
                f"invalid YAML: {exc.reason}", _position_at(self._text, exc.position)
            ) from None
        except yaml.YAMLError as exc:
            raise _fail(f"invalid YAML: {exc}", None) from None
        return self.root

    def _handle(self, event: yaml.Event) -> None:
        if isinstance(event, yaml.DocumentStartEvent):
            if self._documents:
                raise _fail(
                    "a job file holds exactly one YAML document, but a second one starts here",
                    position_of(_marks(event)[0]),
                )
        elif isinstance(event, yaml.DocumentEndEvent):
            self._documents += 1
        elif isinstance(event, yaml.AliasEvent):
            self._alias(event)
        elif isinstance(event, yaml.ScalarEvent):
            tag = event.tag
            if tag is None or tag == "!":
                tag = self._resolver.resolve(ScalarNode, event.value, event.implicit)
            node = ScalarNode(tag, event.value, *_marks(event), style=event.style)
            characters = len(event.value)
            self._remember(event.anchor, node, size=1, depth=1, characters=characters)
            self._attach(node, size=1, depth=1, characters=characters)
        elif isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent):
            self._start_collection(event)
        elif isinstance(event, yaml.SequenceEndEvent | yaml.MappingEndEvent):
            self._end_collection(event)

    def _start_collection(self, event: yaml.SequenceStartEvent | yaml.MappingStartEvent) -> None:
        start, end = _marks(event)
        if len(self._open) >= MAX_DEPTH:
            raise _fail(_too_deep(), position_of(start))
        kind = SequenceNode if isinstance(event, yaml.SequenceStartEvent) else MappingNode
        tag = event.tag
        if tag is None or tag == "!":
            tag = self._resolver.resolve(kind, None, event.implicit)
        node = kind(tag, [], start, end, flow_style=event.flow_style)
        self._open.append(_OpenCollection(node=node, anchor=event.anchor))
        self._open_size += 1

    def _end_collection(self, event: yaml.Event) -> None:
        closed = self._open.pop()
        self._open_size -= closed.size
        self._open_characters -= closed.characters
        closed.node.end_mark = _marks(event)[1]
        closed.node.value = closed.pairs if isinstance(closed.node, MappingNode) else closed.items
        # An anchor becomes usable only once its node is complete: an alias met earlier is a cycle.
        size, depth, characters = closed.size, closed.depth, closed.characters
        self._remember(closed.anchor, closed.node, size=size, depth=depth, characters=characters)
        self._attach(closed.node, size=size, depth=depth, characters=characters)

    def _alias(self, event: yaml.AliasEvent) -> None:
        anchor = event.anchor or ""
        known = self._anchors.get(anchor)
        if known is None:
            enclosing = any(frame.anchor == anchor for frame in self._open)
            reason = "an anchor that contains it" if enclosing else "no anchor defined before it"
            raise _fail(f"the alias *{anchor} refers to {reason}", position_of(_marks(event)[0]))
        node, size, depth, characters = known
        self._attach(
            node,
            size=size,
            depth=depth,
            characters=characters,
            alias=anchor,
            mark=_marks(event)[0],
        )

    def _remember(
        self, anchor: str | None, node: Node, *, size: int, depth: int, characters: int
    ) -> None:
        if anchor is not None:
            self._anchors[anchor] = (node, size, depth, characters)

    def _attach(
        self,
        node: Node,
        *,
        size: int,
        depth: int,
        characters: int,
        alias: str | None = None,
        mark: Mark | None = None,
    ) -> None:
        through = f" (through the alias *{alias})" if alias else ""
        if size + self._open_size > MAX_NODES:
            raise _fail(
                f"the document expands to more than {MAX_NODES} YAML nodes{through}; "
                "a job file this large, or an alias used to multiply content, is refused",
                position_of(mark or node.start_mark),
            )
        if characters + self._open_characters > MAX_EXPANDED_CHARACTERS:
            raise _fail(
                f"the document's text expands to more than {MAX_EXPANDED_CHARACTERS} "
                f"characters{through}; an alias used to multiply content is refused",
                position_of(mark or node.start_mark),
            )
        if depth + len(self._open) > MAX_DEPTH:
            raise _fail(_too_deep(), position_of(mark or node.start_mark))
        if not self._open:
            self.root = node
            return
        parent = self._open[-1]
        parent.size += size
        self._open_size += size
        parent.characters += characters
        self._open_characters += characters
        parent.depth = max(parent.depth, depth + 1)
        if isinstance(parent.node, SequenceNode):
            parent.items.append(node)
        elif parent.pending_key is None:
            parent.pending_key = node
        else:
            parent.pairs.append((parent.pending_key, node))
            parent.pending_key = None


class _ParserNestingLimit(Exception):
    """The event parser refused the document's nesting before this module's own limit could."""


def _is_nesting_refusal(exc: yaml.MarkedYAMLError) -> bool:
    return "nesting depth" in (exc.problem or "")


def _too_deep() -> str:
    return f"the document nests more than {MAX_DEPTH} levels deep"


def _mark_position(exc: yaml.MarkedYAMLError) -> Position | None:
    mark = exc.problem_mark or exc.context_mark
    return position_of(mark) if mark is not None else None


def _describe_yaml_error(exc: yaml.MarkedYAMLError) -> str:
    problem = exc.problem or "the text is not valid YAML"
    if not exc.context:
        return f"invalid YAML: {problem}"
    start, end = exc.context_mark, exc.problem_mark
    if start is not None and end is not None and start.line != end.line:
        return f"invalid YAML: {problem} ({exc.context} that starts on line {start.line + 1})"
    return f"invalid YAML: {problem} ({exc.context})"


def compose_document(text: str) -> Node | None:
    """The node tree of the one YAML document in `text` (None if it is empty).

    Raises ProtocolError for YAML syntax errors, a second document, an alias without anchor or
    inside its own anchor, and documents beyond MAX_NODES or MAX_DEPTH.
    """
    ordinary = _composed_by_libyaml(text)
    if ordinary is not None:
        return ordinary
    try:
        return _Composer(text).compose()
    except _ParserNestingLimit:
        # Newer libyaml (bundled since PyYAML 6.0.4) refuses nesting beyond 1,000 levels while
        # scanning ahead, before the events that cross MAX_DEPTH reach the composer. The pure
        # Python parser has no such limit, so it finds the level where the document crosses ours.
        return _Composer(text).compose(yaml.SafeLoader)


def _composed_by_libyaml(text: str) -> Node | None:
    """The tree as libyaml's own composer builds it, twice as fast as composing from events
    here, if the document is an ordinary one: one non-empty document, within the limits, with
    no alias inside its own anchor. None for anything else, which the careful composer above
    then accepts or explains.

    libyaml composes aliases as shared nodes, without expanding them, so an alias bomb is small
    here and is caught by `_within_limits` before anything walks it expanded."""
    if _EventParser is yaml.SafeLoader:
        return None
    try:
        root = yaml.compose(text, Loader=_LibyamlComposer)
    except yaml.YAMLError:
        return None
    return root if root is not None and _within_limits(root) else None


def _within_limits(root: Node) -> bool:
    """Whether `root`, with every alias expanded, has at most MAX_NODES nodes, MAX_DEPTH
    levels and MAX_EXPANDED_CHARACTERS characters of scalars (counted as the composer above
    counts them).

    The tree is walked a level at a time, a shared node once for each use, so what is counted
    is the expanded document; the walk stops at the first level past either limit, so an alias
    bomb (or an alias inside its own anchor, which never ends) costs at most MAX_NODES steps."""
    level: list[Node] = [root]
    nodes = characters = 0
    for _ in range(MAX_DEPTH):
        nodes += len(level)
        if nodes > MAX_NODES:
            return False
        below: list[Node] = []
        for node in level:
            if isinstance(node, ScalarNode):
                characters += len(node.value)
            elif isinstance(node, SequenceNode):
                below.extend(node.value)
            elif isinstance(node, MappingNode):
                for pair in node.value:
                    below.extend(pair)
        if characters > MAX_EXPANDED_CHARACTERS:
            return False
        if not below:
            return True
        level = below
    return False
