"""The example jobs the portal's submit page and the built-in marketplace start from.

They are the project's `examples/jobs/*.yaml`, shipped inside the package (the package's
`job_examples` folder links to them, and a built package holds copies), so the examples a
user reads in the repository and the ones the portal offers are the same files.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib.resources import files

from pai.errors import InvalidParametersError

DEFAULT_EXAMPLE = "hello-world"
SUFFIX = ".yaml"


@dataclass(frozen=True)
class JobExample:
    name: str
    summary: str
    """The first sentence of the file's opening comment."""
    text: str


@cache
def job_examples() -> dict[str, JobExample]:
    """Every example by name (the file name without `.yaml`), in name order."""
    folder = files("pai.marketplace") / "job_examples"
    found = {}
    for entry in sorted(folder.iterdir(), key=lambda entry: entry.name):
        if entry.name.endswith(SUFFIX):
            text = entry.read_text(encoding="utf-8")
            name = entry.name.removesuffix(SUFFIX)
            found[name] = JobExample(name, _summary(text), text)
    return found


def job_example(name: str) -> JobExample:
    example = job_examples().get(name)
    if example is None:
        known = ", ".join(job_examples())
        raise InvalidParametersError(f"there is no example job '{name}' (examples: {known})")
    return example


def _summary(text: str) -> str:
    paragraph = []
    for line in text.splitlines():
        words = line.lstrip("#").strip()
        if not line.startswith("#") or not words:
            break
        paragraph.append(words)
    return " ".join(paragraph).split(". ")[0].rstrip(".")
