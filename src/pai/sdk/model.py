"""The base of every object the SDK returns: snake_case attributes over OpenPAI's camelCase JSON."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict
from pydantic.alias_generators import to_camel


class ApiModel(BaseModel):
    """An API object: `job.total_gpu_number` reads the JSON field `totalGpuNumber`.

    Fields the server adds in later versions are kept (`model_extra`) rather than rejected, so
    an older client keeps working against a newer server. `raw()` gives back the JSON as the
    server sent it. A model's validator is built when it is first used (`defer_build`), so
    that a command pays only for the objects it reads, not for every one the SDK defines.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        frozen=True,
        defer_build=True,
    )

    def raw(self) -> dict[str, Any]:
        """The object as JSON, with the server's field names and only the fields it sent."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


def _as_list(value: Any) -> Any:
    """OpenPAI exit specs write a single `solution` string where a list is usual."""
    if value is None:
        return []
    return [value] if isinstance(value, str) else value


StringList = Annotated[list[str], BeforeValidator(_as_list)]
"""A list of strings that also accepts one string or null."""
