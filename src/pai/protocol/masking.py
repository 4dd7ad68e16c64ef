"""Jobs as they may be shown or stored: every secret value replaced by a mask.

Masked are the values of the `secrets` block (its keys stay, so a reader sees which secrets the
job has) and any registry password written in clear instead of as a secret reference. The masked
text keeps everything else as the user wrote it, comments included; when an edit of the text
cannot be proven right (anchors shared with secrets, merge keys), the masked values are dumped
as fresh YAML instead, so a secret never survives either way.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from pai.protocol.errors import ProtocolError
from pai.protocol.job import JobSpec
from pai.protocol.yaml_tree import compose_document, decode_job_text
from pai.protocol.yaml_values import build_values, merged_pairs

SECRET_MASK = "******"
_MASK_YAML = "'******'"
_SECRET_REFERENCE = re.compile(r"<%\s*\$secrets\b[^%]{0,512}%>")


def holds_clear_secret(password: Any) -> bool:
    """Whether a password is written in clear rather than only as secret references."""
    return not (
        isinstance(password, str)
        and _SECRET_REFERENCE.search(password) is not None
        and not _SECRET_REFERENCE.sub("", password).strip()
    )


def registry_passwords_as_secrets(spec: JobSpec) -> JobSpec:
    """The job with every registry password written in clear moved into its secrets (as
    `docker_password_<n>`, referenced from where it was), as OpenPAI's portal does: stored
    sealed with the other secrets, it is still there when the task's image is pulled."""
    secrets = dict(spec.secrets)
    prerequisites = list(spec.prerequisites)
    for position, prerequisite in enumerate(prerequisites):
        auth = getattr(prerequisite, "auth", None)
        if auth is None or not auth.password or not holds_clear_secret(auth.password):
            continue
        name = next(
            f"docker_password_{number}"
            for number in itertools.count()
            if f"docker_password_{number}" not in secrets
        )
        secrets[name] = auth.password
        reference = auth.model_copy(update={"password": f"<% $secrets.{name} %>"})
        prerequisites[position] = prerequisite.model_copy(update={"auth": reference})
    if secrets == spec.secrets:
        return spec
    return spec.model_copy(update={"secrets": secrets, "prerequisites": prerequisites})


def masked_job_dict(spec: JobSpec) -> dict[str, Any]:
    """The job as OpenPAI JSON (camelCase, defaults applied) with secret values masked."""
    data = spec.model_dump(by_alias=True, mode="json", exclude_none=True)
    data["secrets"] = dict.fromkeys(data.get("secrets", {}), SECRET_MASK)
    for prerequisite in data.get("prerequisites", []):
        auth = prerequisite.get("auth") or {}
        if "password" in auth and holds_clear_secret(auth["password"]):
            auth["password"] = SECRET_MASK
    return data


def _scalar_value(node: Node) -> Any:
    return node.value if isinstance(node, ScalarNode) else None


def _entry(node: Node | None, key: str) -> Node | None:
    if not isinstance(node, MappingNode):
        return None
    found = None
    for key_node, value_node, _ in merged_pairs(node):
        if _scalar_value(key_node) == key:
            found = value_node
    return found


def _sensitive_nodes(root: MappingNode) -> list[Node]:
    """The nodes whose values must not be shown: secret values and clear registry passwords."""
    nodes: list[Node] = []
    for key_node, value_node, _ in merged_pairs(root):
        name = _scalar_value(key_node)
        if name == "secrets":
            if isinstance(value_node, MappingNode):
                nodes.extend(value for _, value, _ in merged_pairs(value_node))
            elif not (isinstance(value_node, ScalarNode) and value_node.tag.endswith(":null")):
                nodes.append(value_node)
        elif name == "prerequisites" and isinstance(value_node, SequenceNode):
            for item in value_node.value:
                password = _entry(_entry(item, "auth"), "password")
                if password is not None and (
                    not isinstance(password, ScalarNode) or holds_clear_secret(password.value)
                ):
                    nodes.append(password)
    return nodes


def _with_masks(node: Node, targets: set[int], memo: dict[int, Node]) -> Node:
    """A copy of the tree with the target nodes masked; nodes shared by aliases stay shared."""
    if id(node) in memo:
        return memo[id(node)]
    copy: Node
    if id(node) in targets:
        copy = ScalarNode("tag:yaml.org,2002:str", SECRET_MASK, node.start_mark, node.end_mark)
    elif isinstance(node, MappingNode):
        pairs = [
            (_with_masks(k, targets, memo), _with_masks(v, targets, memo)) for k, v in node.value
        ]
        copy = MappingNode(node.tag, pairs, node.start_mark, node.end_mark, node.flow_style)
    elif isinstance(node, SequenceNode):
        items = [_with_masks(item, targets, memo) for item in node.value]
        copy = SequenceNode(node.tag, items, node.start_mark, node.end_mark, node.flow_style)
    else:
        copy = node
    memo[id(node)] = copy
    return copy


_Edit = tuple[int, int, str]


def _span(text: str, node: Node) -> tuple[int, int, str]:
    """Where the node's text starts and ends, and the whitespace it ends with (kept)."""
    start, end = node.start_mark.index, node.end_mark.index
    span = text[start:end]
    return start, end, span[len(span.rstrip()) :]


def _value_masked(text: str, node: Node) -> _Edit:
    start, end, trailing = _span(text, node)
    return start, end, _MASK_YAML + trailing


def _mapping_masked(text: str, node: MappingNode) -> _Edit:
    start, end, trailing = _span(text, node)
    entries = [
        f"{text[key.start_mark.index : key.end_mark.index]}: {_MASK_YAML}" for key, _ in node.value
    ]
    if node.flow_style:
        return start, end, "{" + ", ".join(entries) + "}" + trailing
    return start, end, ("\n" + " " * node.start_mark.column).join(entries) + trailing


def _edited_text(text: str, root: MappingNode, sensitive: list[Node]) -> str:
    """The text with a mask written over each sensitive value, comments elsewhere kept.

    A secrets mapping is rewritten whole, so comments inside it go too.
    """
    edits: list[_Edit] = []
    covered: set[int] = set()
    for key, value in root.value:
        if _scalar_value(key) == "secrets" and isinstance(value, MappingNode) and value.value:
            edits.append(_mapping_masked(text, value))
            covered.update(id(secret) for _, secret in value.value)
    edits += [_value_masked(text, node) for node in sensitive if id(node) not in covered]
    result = text
    last_start = len(text) + 1
    for start, end, new in sorted(edits, reverse=True):
        if end <= last_start:
            result = result[:start] + new + result[end:]
            last_start = start
    return result


def _values(text: str) -> Any:
    try:
        root = compose_document(text)
    except ProtocolError:
        return None
    return build_values(root).data if root is not None else None


def masked_job_text(text: str | bytes) -> str:
    """The submitted job text with secret values masked as '******'.

    Raises ProtocolError if the text is not a readable YAML document.
    """
    decoded = decode_job_text(text)
    return masked_composed_text(decoded, compose_document(decoded))


def masked_composed_text(decoded: str, root: Node | None) -> str:
    """`masked_job_text` of a text already composed into `root`."""
    if not isinstance(root, MappingNode):
        return decoded
    sensitive = _sensitive_nodes(root)
    if not sensitive:
        return decoded
    masked = build_values(_with_masks(root, {id(node) for node in sensitive}, {})).data
    edited = _edited_text(decoded, root, sensitive)
    if _values(edited) == masked:
        return edited
    return yaml.safe_dump(masked, sort_keys=False, allow_unicode=True)
