"""The marketplace: job templates to find, publish, star and run.

    for item in client.market_items(keyword="mnist", tags=["pytorch"]):
        print(item.name, item.star_number)
    submitted = client.run_item("hello-world", parameters={"greeting": "hi"})
    client.publish("My template", client.job_config("my-job"), summary="what it does")

An item is named by its id or, when no other item has that name, by its name.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import yaml
from pydantic import Field

from pai.sdk.errors import InvalidArgumentError, NotFoundError
from pai.sdk.job_models import JobSubmission
from pai.sdk.jobs import JobsApi
from pai.sdk.model import ApiModel
from pai.sdk.names import segment
from pai.sdk.submission import job_request

SECRET_MASK = "******"
"""How the server shows a secret value."""


class MarketItem(ApiModel):
    """A marketplace item (openpaimarketplace's fields)."""

    id: str
    name: str
    author: str
    type: str = "template"
    source: str = "marketplace"
    summary: str = ""
    description: str = ""
    """Markdown."""
    categories: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    protocol: str = ""
    """The job as YAML, secret values as ******."""
    is_public: bool = True
    is_private: bool = False
    group_list: list[str] = Field(default_factory=list)
    status: str = "approved"
    use_number: int = 0
    star_number: int = 0
    starred: bool = False
    created_at: datetime | None = None
    updated_at: datetime | None = None


class MarketApi(JobsApi):
    """Methods for the marketplace."""

    def market_items(
        self,
        *,
        keyword: str | None = None,
        tags: Sequence[str] = (),
        type: str | None = None,
        author: str | None = None,
        name: str | None = None,
        starred: bool = False,
    ) -> list[MarketItem]:
        """The items you may see matching every filter (all of `tags`), newest first."""
        params: dict[str, str | int] = {}
        for key, value in (
            ("keyword", keyword),
            ("type", type),
            ("author", author),
            ("name", name),
        ):
            if value:
                params[key] = value
        if tags:
            params["tags"] = ",".join(tags)
        if starred:
            params["starred"] = "true"
        body = self._transport.get("/marketplace/items", params=params)
        return [MarketItem.model_validate(item) for item in body]

    def market_item(self, item: str) -> MarketItem:
        """The item with this id, or else the one item with this name."""
        try:
            return MarketItem.model_validate(
                self._transport.get(f"/marketplace/items/{segment(item)}")
            )
        except NotFoundError:
            named = self.market_items(name=item)
            if len(named) != 1:
                raise
            return named[0]

    def publish(
        self,
        name: str,
        protocol: str,
        *,
        summary: str = "",
        description: str = "",
        tags: Sequence[str] = (),
        categories: Sequence[str] = (),
        private: bool = False,
        groups: Sequence[str] = (),
    ) -> MarketItem:
        """Publish a job (YAML text) as a template: public, or `private` (you alone), or
        shared with `groups`. Its secret values are masked by the server."""
        body = {
            "name": name,
            "protocol": protocol,
            "summary": summary,
            "description": description,
            "tags": list(tags),
            "categories": list(categories),
            "isPublic": not private and not groups,
            "isPrivate": private,
            "groupList": list(groups),
        }
        return MarketItem.model_validate(self._transport.send("POST", "/marketplace/items", body))

    def run_item(
        self,
        item: str,
        *,
        parameters: Mapping[str, Any] | None = None,
        job_name: str | None = None,
        virtual_cluster: str | None = None,
    ) -> JobSubmission:
        """Submit a job from a template, named `job_name` (else the template's job name with a
        random suffix); `parameters` and `virtual_cluster` edit it as `submit` does. The
        template's secrets are masked: a template that uses secrets cannot run as it is."""
        found = self.market_item(item)
        document = yaml.safe_load(found.protocol)
        if not isinstance(document, dict):
            raise InvalidArgumentError(f"marketplace item '{found.name}' holds no job")
        masked = sorted(
            key for key, value in (document.get("secrets") or {}).items() if value == SECRET_MASK
        )
        if masked:
            raise InvalidArgumentError(
                f"marketplace item '{found.name}' uses secrets ({', '.join(masked)}), which a "
                "template never shares: save its protocol, fill them in and submit that file"
            )
        document["name"] = job_name or f"{document.get('name', 'job')}-{secrets.token_hex(2)}"
        request = job_request(document, parameters, virtual_cluster)
        response = self._transport.request(
            "POST",
            f"/marketplace/items/{segment(found.id)}/submissions",
            content=request.content,
            headers={"Content-Type": request.content_type},
        )
        return JobSubmission.model_validate(response.json())

    def star(self, item: str, starred: bool = True) -> MarketItem:
        """Star (or with `starred=False`, unstar) an item."""
        found = self.market_item(item)
        path = f"/marketplace/users/{segment(self.username or '')}/starItems/{segment(found.id)}"
        method = "PUT" if starred else "DELETE"
        return MarketItem.model_validate(self._transport.send(method, path))

    def delete_item(self, item: str) -> str:
        found = self.market_item(item)
        answer = self._transport.send("DELETE", f"/marketplace/items/{segment(found.id)}")
        return str(answer["message"])
