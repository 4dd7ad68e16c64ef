"""The two ways a job file is composed agree: libyaml's composer, used for ordinary documents
because it is faster, and the careful composer, which enforces the limits while composing and
explains every refusal. A document the quick way accepts must compose to the same tree the
careful way does; a document the careful way refuses must never be accepted the quick way."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from yaml.nodes import MappingNode, Node, ScalarNode

from pai.protocol import MAX_DEPTH, MAX_NODES
from pai.protocol.errors import ProtocolError
from pai.protocol.yaml_tree import _composed_by_libyaml, _Composer

ANCHORS = ["a", "b", "c"]


def shape(node: Node) -> Any:
    """Everything of a node tree that parsing reads: tags, values, places; aliases expanded."""
    where = (node.start_mark.line, node.start_mark.column)
    if isinstance(node, ScalarNode):
        return (node.tag, node.value, where)
    if isinstance(node, MappingNode):
        return (node.tag, [(shape(k), shape(v)) for k, v in node.value], where)
    return (node.tag, [shape(item) for item in node.value], where)


def carefully(text: str) -> Any:
    try:
        root = _Composer(text).compose()
    except ProtocolError:
        return "refused"
    return None if root is None else shape(root)


def assert_agree(text: str) -> None:
    quick = _composed_by_libyaml(text)
    if quick is not None:
        assert carefully(text) == shape(quick)


def flow(value: Any) -> str:
    """A value as flow YAML; ("&", name, value) anchors a value, ("*", name) is an alias."""
    if isinstance(value, tuple) and value[0] == "&":
        return f"&{value[1]} {flow(value[2])}"
    if isinstance(value, tuple) and value[0] == "*":
        return f"*{value[1]}"
    if isinstance(value, list):
        return "[" + ", ".join(flow(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}: {flow(item)}" for key, item in value.items()) + "}"
    return str(value)


scalars = st.sampled_from(["1", "x", "null", "true", "2.5", '"q"', "2024-05-01", "!!str 3"])
aliases = st.sampled_from(ANCHORS).map(lambda name: ("*", name))
documents = st.recursive(
    scalars | aliases,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(["k", "l", "m", "<<"]), inner, max_size=3)
        | st.tuples(st.just("&"), st.sampled_from(ANCHORS), inner)
    ),
    max_leaves=12,
)


@settings(max_examples=300)
@given(documents, st.sampled_from(["", "\n---\nsecond: 1\n", "\n...\n"]))
def test_libyaml_composes_what_the_careful_composer_does(value: Any, ending: str) -> None:
    assert_agree("root: " + flow(value) + ending)


def test_documents_at_and_past_the_limits_get_the_same_verdict() -> None:
    for depth in (MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1):
        text = "[" * depth + "1" + "]" * depth
        assert_agree(text)
        assert (_composed_by_libyaml(text) is None) == (carefully(text) == "refused")
    for outer in (MAX_DEPTH // 2 - 1, MAX_DEPTH // 2, MAX_DEPTH // 2 + 1):
        inner = MAX_DEPTH // 2
        text = (
            f"a: &a {'[' * inner}1{']' * inner}\n"
            f"b: {'[' * outer}*a{']' * outer}\n"  # as deep as the two together
        )
        assert (_composed_by_libyaml(text) is None) == (carefully(text) == "refused")
    for count in (MAX_NODES - 2, MAX_NODES - 1, MAX_NODES):
        text = "[" + ", ".join(["1"] * count) + "]"
        assert (_composed_by_libyaml(text) is None) == (carefully(text) == "refused")


def test_an_alias_inside_its_own_anchor_is_left_to_the_careful_composer() -> None:
    text = "a: &a [1, *a]\n"
    assert _composed_by_libyaml(text) is None
    assert carefully(text) == "refused"
