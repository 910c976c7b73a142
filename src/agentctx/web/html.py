"""HTML built from escaped parts: every string is text unless it is already :class:`Safe`.

Record bodies, titles, file names and CLAUDE.md text are untrusted (a transcript can put anything
in them), so the views never format HTML from strings. They call :func:`tag`, which escapes every
child and attribute value that is not :class:`Safe`, and the only way to make a :class:`Safe` is
through this module. A ``<script>`` in a record body therefore arrives as ``&lt;script&gt;``, and
a bidi override, a zero-width or a tag character (invisible, read by the model: issue 24) as a
visible ``<U+202E>``, so that the user reviews what the model reads.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, TypeAlias

from agentctx.core.text import reveal

if TYPE_CHECKING:
    from collections.abc import Iterable

VOID = frozenset({"br", "hr", "img", "input", "link", "meta"})

Child: TypeAlias = "Safe | str | int | float | Iterable[Child] | None"


class Safe(str):
    """Markup that is already escaped (made only by this module)."""

    __slots__ = ()


def escape(value: object) -> Safe:
    """``value`` as text: ``& < > " '`` escaped, and invisible characters and odd line breaks
    shown as ``<U+XXXX>`` (:func:`agentctx.core.text.reveal`), unless it is :class:`Safe` already."""
    if isinstance(value, Safe):
        return value
    return Safe(html.escape(reveal(str(value)), quote=True))


def _children(children: Iterable[Child], out: list[str]) -> None:
    for child in children:
        if child is None:
            continue
        if isinstance(child, str | int | float):
            out.append(escape(child))
        else:
            _children(child, out)


def join(*children: Child) -> Safe:
    """Children concatenated (each escaped unless safe)."""
    out: list[str] = []
    _children(children, out)
    return Safe("".join(out))


def _attr_name(name: str) -> str:
    # class_ and for_ dodge keywords; data_kind becomes data-kind.
    return name.rstrip("_").replace("_", "-")


def tag(element: str, /, *children: Child, **attrs: str | int | float | bool | None) -> Safe:
    """``<element attrs>children</element>``; ``True`` gives a bare attribute, ``None``/``False``
    none."""
    parts = [element]
    for key, value in attrs.items():
        if value is None or value is False:
            continue
        if value is True:
            parts.append(_attr_name(key))
        else:
            parts.append(f'{_attr_name(key)}="{escape(value)}"')
    opening = f"<{' '.join(parts)}>"
    if element in VOID:
        return Safe(opening)
    return Safe(f"{opening}{join(*children)}</{element}>")
