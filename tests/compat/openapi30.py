"""Checking a response against an OpenAPI 3.0 document with a JSON Schema validator.

OpenAPI 3.0 schemas are JSON Schema with a few differences; the one that matters here is
`nullable: true`, which JSON Schema spells as a `null` type. References to other documents
(OpenPAI's job protocol, on the web) are not followed: tests talk to nothing but this machine,
and PAI's own tests check the job protocol.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft7Validator

REMOTE_REFERENCE_STANDIN: dict[str, Any] = {"type": "object"}


def json_schema(node: Any) -> Any:
    """`node` of an OpenAPI 3.0 document as JSON Schema (draft 7)."""
    if isinstance(node, list):
        return [json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    reference = node.get("$ref")
    if isinstance(reference, str) and not reference.startswith("#"):
        return dict(REMOTE_REFERENCE_STANDIN)
    converted = {key: json_schema(value) for key, value in node.items() if key != "nullable"}
    if node.get("nullable") is True:
        if isinstance(converted.get("type"), str):
            converted["type"] = [converted["type"], "null"]
        if "enum" in converted:
            converted["enum"] = [*converted["enum"], None]
    return converted


class OpenApiDocument:
    """An OpenAPI 3.0 document: its operations and the schemas of their responses."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self._components = json_schema(document.get("components", {}))

    def operations(self) -> set[tuple[str, str]]:
        """Every (METHOD, path template) the document describes."""
        return {
            (method.upper(), path)
            for path, item in self.document["paths"].items()
            for method in item
            if method in {"get", "put", "post", "delete", "patch"}
        }

    def response(self, method: str, path: str, status: int) -> dict[str, Any]:
        """The response the document promises for `status` (references followed)."""
        responses = self.document["paths"][path][method.lower()]["responses"]
        declared = responses.get(str(status))
        assert declared is not None, (
            f"OpenPAI's schema has no {status} response for {method} {path}; "
            f"it has {sorted(responses)}"
        )
        while "$ref" in declared:
            declared = self._follow(declared["$ref"])
        return dict(declared)

    def problems(self, method: str, path: str, status: int, body: Any) -> list[str]:
        """How `body` breaks the schema of that response; [] if it fits (or has no schema)."""
        content = self.response(method, path, status).get("content", {})
        schemas = [media["schema"] for media in content.values() if "schema" in media]
        if not schemas:
            return []
        schema = {**json_schema(schemas[0]), "components": self._components}
        validator = Draft7Validator(schema)
        return [
            f"{'/'.join(str(part) for part in error.absolute_path) or '(body)'}: {error.message}"
            for error in sorted(validator.iter_errors(body), key=lambda error: str(error.path))
        ]

    def _follow(self, reference: str) -> dict[str, Any]:
        node: Any = self.document
        for part in reference.removeprefix("#/").split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return dict(node)
