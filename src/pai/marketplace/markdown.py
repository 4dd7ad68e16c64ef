"""Item descriptions are Markdown written by any user and shown to every other: rendered with
raw HTML off (it is shown as text) and links limited to safe schemes (markdown-it's own
check refuses `javascript:`, `vbscript:`, `file:` and `data:` other than images)."""

from __future__ import annotations

from functools import cache

from markdown_it import MarkdownIt


@cache
def _renderer() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(
        ["table", "strikethrough"]
    )


def render_markdown(text: str) -> str:
    """The HTML of `text`, safe to put in a page."""
    return _renderer().render(text)
