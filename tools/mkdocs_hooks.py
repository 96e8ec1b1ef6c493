"""MkDocs hooks for the Switchyard site (see mkdocs.yml).

Pages in ``docs/`` that ``nav`` does not list are appended to a section instead of being left
out, so a helper adding ``docs/foo.md`` cannot break the strict build or hide the page. The
section is the page's ``nav_section`` front-matter key, else ``Guides``. The title is the page's
first ``# heading``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

DEFAULT_SECTION = "Guides"
_FRONT = re.compile(r"\A---\n(.*?)\n---\n", re.S)


def _listed(nav: Any, out: set[str]) -> set[str]:
    if isinstance(nav, str):
        out.add(nav)
    elif isinstance(nav, list):
        for item in nav:
            _listed(item, out)
    elif isinstance(nav, dict):
        for value in nav.values():
            _listed(value, out)
    return out


def _title_and_section(path: Path) -> tuple[str, str]:
    text = path.read_text(encoding="utf-8")
    section = DEFAULT_SECTION
    front = _FRONT.match(text)
    if front:
        found = re.search(r"^nav_section:\s*(.+)$", front.group(1), re.M)
        if found:
            section = found.group(1).strip().strip("\"'")
    heading = re.search(r"^#\s+(.+)$", text, re.M)
    title = heading.group(1).strip().strip("`") if heading else path.stem.replace("-", " ").capitalize()
    return title, section


def on_config(config: Any) -> Any:
    """Appends every unlisted ``docs/**/*.md`` page to its section of ``nav``."""
    nav = config["nav"]
    if nav is None:
        return config  # no nav at all: MkDocs lists every page itself
    docs = Path(config["docs_dir"])
    listed = _listed(nav, set())
    for page in sorted(docs.rglob("*.md")):
        rel = page.relative_to(docs).as_posix()
        if rel in listed or any(part.startswith(("_", ".")) for part in page.relative_to(docs).parts):
            continue
        title, section = _title_and_section(page)
        target = next((item for item in nav if isinstance(item, dict) and section in item), None)
        if target is None:
            target = {section: []}
            nav.insert(len(nav) - 1 if nav and "API reference" in nav[-1] else len(nav), target)
        target[section].append({title: rel})
    return config


_EXAMPLE_LINK = re.compile(r"\]\(((?:\.\./)+examples/[^)#\s]+)\)")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Points links to files under ``examples/`` (outside the site) at the examples walkthrough.

    The docs link example files relatively so they work when browsing the repository; the site
    has no copy of them, so such a link goes to ``examples.md``, which walks through every
    example. A link to an example that does not exist is left alone, so the strict build fails.
    """
    docs = Path(config["docs_dir"])
    src_dir = (docs / page.file.src_uri).parent

    def repl(match: re.Match[str]) -> str:
        target = (src_dir / match.group(1)).resolve()
        if not target.exists():
            return match.group(0)
        walkthrough = Path(os.path.relpath(docs / "examples.md", src_dir)).as_posix()
        return f"]({walkthrough})"

    return _EXAMPLE_LINK.sub(repl, markdown)


_SPHINX_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):<code>(~?)([^<]*)</code>")


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """Renders the Sphinx roles in the library's docstrings (``:class:`~a.B```) as code.

    The API reference is generated from docstrings written for both Sphinx-style readers and
    ``help()``; without this the role name would show as literal text before the code span.
    """

    def repl(match: re.Match[str]) -> str:
        name = match.group(2)
        return f"<code>{name.rsplit('.', 1)[-1] if match.group(1) else name}</code>"

    return _SPHINX_ROLE.sub(repl, html)
