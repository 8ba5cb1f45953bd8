"""Documents into chunks that keep their structure: Markdown by headings, then blocks;
plain text by paragraphs; HTML and PDF through their text. Every chunk knows its span
(character offsets into the document's text) and the headings above it, so an answer can
cite exactly where it read."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["TextChunk", "chunk_markdown", "chunk_pages", "chunk_text", "html_text", "pdf_text"]

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n")


@dataclass(frozen=True, slots=True)
class TextChunk:
    """A piece of a document: its text is ``document_text[start:end]``."""

    start: int
    end: int
    heading: str = ""
    """The headings above the chunk, outermost first, joined by `` > ``."""
    page: int | None = None


def _pieces(text: str, start: int, end: int, limit: int) -> Iterator[tuple[int, int]]:
    """Split ``text[start:end]`` into spans of at most `limit` characters, at sentence or
    line ends where there are any, else at whitespace, else anywhere."""
    while end - start > limit:
        cut = -1
        for m in _SENTENCE.finditer(text, start, start + limit):
            if m.start() > start:
                cut = m.start()
        if cut <= start:
            space = text.rfind(" ", start + 1, start + limit)
            cut = space if space > start else start + limit
        yield start, cut
        start = cut
        while start < end and text[start].isspace():
            start += 1
    if end > start:
        yield start, end


def _trimmed(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _group(text: str, blocks: list[tuple[int, int, str]], limit: int) -> list[TextChunk]:
    """Consecutive blocks under one heading joined while they fit in `limit`."""
    out: list[TextChunk] = []
    current: tuple[int, int, str] | None = None
    for start, end, heading in blocks:
        start, end = _trimmed(text, start, end)
        if end <= start:
            continue
        if current is not None and current[2] == heading and end - current[0] <= limit:
            current = (current[0], end, heading)
            continue
        if current is not None:
            out.extend(TextChunk(s, e, current[2]) for s, e in _pieces(text, *current[:2], limit))
        current = (start, end, heading)
    if current is not None:
        out.extend(TextChunk(s, e, current[2]) for s, e in _pieces(text, *current[:2], limit))
    return out


def chunk_text(text: str, *, limit: int = 1200) -> list[TextChunk]:
    """Plain text: paragraphs (blank-line separated), joined while they fit."""
    blocks: list[tuple[int, int, str]] = []
    position = 0
    for m in re.finditer(r"\n\s*\n", text):
        blocks.append((position, m.start(), ""))
        position = m.end()
    blocks.append((position, len(text), ""))
    return _group(text, blocks, limit)


def chunk_pages(text: str, starts: list[int], *, limit: int = 1200) -> list[TextChunk]:
    """Paged text (a PDF's): paragraphs joined while they fit, never across a page."""
    out: list[TextChunk] = []
    for number, start in enumerate(starts, 1):
        end = starts[number] if number < len(starts) else len(text)
        for c in chunk_text(text[start:end], limit=limit):
            out.append(TextChunk(start + c.start, start + c.end, c.heading, number))
    return out


def chunk_markdown(text: str, *, limit: int = 1200) -> list[TextChunk]:
    """Markdown: a chunk never spans two sections; blocks of one section are joined while
    they fit, and a heading starts its section's first chunk."""
    from markdown_it import MarkdownIt

    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    tokens = MarkdownIt("commonmark").parse(text)
    headings: list[tuple[int, str]] = []
    blocks: list[tuple[int, int, str]] = []
    for i, token in enumerate(tokens):
        if token.level != 0 or token.map is None or token.nesting == -1:
            continue
        first, last = token.map
        if token.type == "heading_open":
            depth = int(token.tag[1:])
            title = tokens[i + 1].content.strip() if i + 1 < len(tokens) else ""
            headings = [h for h in headings if h[0] < depth] + [(depth, title)]
        path = " > ".join(t for _, t in headings)
        blocks.append((offsets[first], offsets[min(last, len(lines))], path))
    return _group(text, blocks, limit)


def html_text(html: str) -> str:
    """The readable text of an HTML page, a blank line between blocks, headings kept as
    Markdown headings (so the Markdown chunker keeps the page's sections)."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup(["script", "style", "noscript", "template", "head"]):
        tag.decompose()
    parts: list[str] = []
    for tag in soup.find_all(["h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "pre", "td"]):
        if tag.find_parent(["p", "li", "pre", "td"]) is not None:
            continue  # its text is in the enclosing block already
        said = " ".join(tag.get_text(" ").split())
        if not said:
            continue
        name = str(tag.name)
        parts.append(f"{'#' * int(name[1])} {said}" if name[0] == "h" else said)
    if not parts:
        parts = [" ".join(soup.get_text(" ").split())]
    return "\n\n".join(p for p in parts if p)


def pdf_text(data: bytes) -> tuple[str, list[int]]:
    """The text of a PDF, a blank line between pages, and where each page starts."""
    import io

    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(data))
    text = ""
    starts: list[int] = []
    for page in reader.pages:
        if text:
            text += "\n\n"
        starts.append(len(text))
        text += (page.extract_text() or "").strip()
    return text, starts
