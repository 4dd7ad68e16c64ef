"""The example jobs shipped with PAI (`examples/jobs`) as marketplace items from the first
start, so a fresh installation has templates to find and run.

They are refreshed on every start (an upgrade of PAI updates them) and keep their ids, stars
and run counts; nobody can change or remove them (`items.Marketplace`).
"""

from __future__ import annotations

import itertools
import uuid

from sqlalchemy.orm import Session

from pai.marketplace.examples import JobExample, job_examples
from pai.marketplace.items import APPROVED, SOURCE_PAI, TEMPLATE
from pai.store import market
from pai.store.sharing import MarketItemRow

AUTHOR = "pai"
_NAMESPACE = uuid.UUID("7d3f7a52-5e0c-4b5f-9a51-2b1c6e0f4a11")
EXAMPLE_TAG = "example"


def builtin_id(name: str) -> str:
    """The same id for an example on every installation and every start."""
    return str(uuid.uuid5(_NAMESPACE, name))


def ensure_builtin_items(session: Session) -> None:
    """Add the examples that are missing and refresh the others."""
    for example in job_examples().values():
        row = market.find_item(session, builtin_id(example.name))
        if row is None:
            row = MarketItemRow(
                id=builtin_id(example.name),
                author=AUTHOR,
                source=SOURCE_PAI,
                type=TEMPLATE,
                status=APPROVED,
                use_number=0,
                updated_by=AUTHOR,
                is_public=True,
                is_private=False,
                group_list=[],
                categories=[EXAMPLE_TAG],
                data_type="",
                data_url="",
            )
            session.add(row)
        row.name = example.name
        row.summary = example.summary
        row.description = _description(example)
        row.protocol = example.text
        row.tags = [EXAMPLE_TAG, *_words(example)]


def _description(example: JobExample) -> str:
    """The example's opening comment as Markdown (its lines, paragraphs and lists kept)."""
    opening = itertools.takewhile(lambda line: line.startswith("#"), example.text.splitlines())
    text = "\n".join(line[2:] if line.startswith("# ") else line[1:] for line in opening)
    return (
        f"{text}\n\nShipped with PAI as `examples/jobs/{example.name}.yaml`. "
        "Run it as it is, or change its parameters on the submit page."
    )


def _words(example: JobExample) -> list[str]:
    """Tags from the example's name (`pytorch-ddp` gives `pytorch` and `ddp`)."""
    return [word for word in example.name.split("-") if len(word) > 2 and word != "world"]
