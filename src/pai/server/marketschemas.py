"""Bodies of the marketplace API, with openpaimarketplace's field names."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints, field_validator

from pai.protocol import MAX_DOCUMENT_BYTES
from pai.server.schemas import Body

Label = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64)]
ItemName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=255)]
MAX_LABELS = 20


class ItemRequest(Body):
    """An item as its publisher describes it; `protocol` is the job as YAML text."""

    name: ItemName
    type: Literal["template", "data"] = "template"
    protocol: str = Field(min_length=1, max_length=MAX_DOCUMENT_BYTES)
    summary: str = Field(default="", max_length=1024)
    description: str = Field(default="", max_length=65536, description="Markdown.")
    categories: list[Label] = Field(default_factory=list, max_length=MAX_LABELS)
    tags: list[Label] = Field(default_factory=list, max_length=MAX_LABELS)
    isPublic: bool = True
    isPrivate: bool = False
    groupList: list[Label] = Field(default_factory=list, max_length=MAX_LABELS)
    dataType: str = Field(default="", max_length=32)
    dataUrl: str = Field(default="", max_length=2048)

    @field_validator("name")
    @classmethod
    def _printable(cls, name: str) -> str:
        if not name.isprintable():
            raise ValueError("must be printable text on one line")
        return name

    @field_validator("tags", "categories", "groupList")
    @classmethod
    def _labels(cls, labels: list[str]) -> list[str]:
        for label in labels:
            if "," in label:
                raise ValueError(f"{label!r}: a label has no comma (filters are comma-separated)")
        return list(dict.fromkeys(labels))


class Item(BaseModel):
    """A marketplace item (openpaimarketplace's fields, plus `starred` and `updatedBy`)."""

    id: str
    name: str
    author: str
    type: Literal["template", "data"]
    source: Literal["marketplace", "pai"]
    summary: str
    description: str = Field(description="Markdown.")
    categories: list[str]
    tags: list[str]
    protocol: str = Field(description="The job as YAML, secret values as ******.")
    isPublic: bool
    isPrivate: bool
    groupList: list[str]
    dataType: str
    dataUrl: str
    status: Literal["pending", "approved", "rejected"]
    useNumber: int = Field(description="Jobs submitted from the item.")
    starNumber: int
    starred: bool = Field(description="Whether the caller starred it.")
    createdAt: datetime
    updatedAt: datetime
    updatedBy: str


class LabelCount(BaseModel):
    name: str
    count: int
