"""The documentation site: its nav hook and strict mode (``make docs`` builds the real site in
``make test``; these build tiny sites so the behaviour the merge relies on is pinned down)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

mkdocs_config = pytest.importorskip("mkdocs.config", reason="the docs extra (mkdocs) is not installed")
from mkdocs.commands.build import build  # noqa: E402
from mkdocs.exceptions import Abort  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HOOKS = ROOT / "tools" / "mkdocs_hooks.py"


def _site(tmp: Path, pages: dict[str, str], nav: list[object]) -> Path:
    docs = tmp / "docs"
    for name, text in pages.items():
        (docs / name).parent.mkdir(parents=True, exist_ok=True)
        (docs / name).write_text(text)
    (tmp / "examples").mkdir(exist_ok=True)
    (tmp / "examples" / "router.yaml").write_text("routes: {}\n")
    cfg = {
        "site_name": "t",
        "docs_dir": str(docs),
        "site_dir": str(tmp / "site"),
        "strict": True,
        "hooks": [str(HOOKS)],
        "nav": nav,
        "validation": {"links": {"not_found": "warn"}, "nav": {"omitted_files": "warn"}},
    }
    path = tmp / "mkdocs.yml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _build(path: Path) -> None:
    os.environ["NO_MKDOCS_2_WARNING"] = "1"
    build(mkdocs_config.load_config(str(path)))


def test_unlisted_pages_join_the_nav(tmp_path: Path) -> None:
    pages = {
        "index.md": "# Home\n",
        "agents.md": "# Agent recipes\n",
        "ops/deployment.md": "---\nnav_section: Operations\n---\n# Deployment\n",
    }
    path = _site(tmp_path, pages, [{"Home": "index.md"}, {"Guides": [{"Other": "index.md"}]}])
    _build(path)
    home = (tmp_path / "site" / "index.html").read_text()
    assert "Agent recipes" in home  # appended to Guides
    assert "Deployment" in home and "Operations" in home  # its own section, from front matter


def test_links_to_examples_point_at_the_walkthrough(tmp_path: Path) -> None:
    pages = {"index.md": "# Home\nSee [the config](../examples/router.yaml).\n", "examples.md": "# Examples\n"}
    _build(_site(tmp_path, pages, [{"Home": "index.md"}, {"Examples": "examples.md"}]))
    assert 'href="examples/"' in (tmp_path / "site" / "index.html").read_text()


@pytest.mark.parametrize(
    "text",
    ["See [nothing](missing.md).", "See [a ghost example](../examples/ghost.yaml)."],
    ids=["page", "example"],
)
def test_strict_build_fails_on_broken_links(tmp_path: Path, text: str) -> None:
    pages = {"index.md": f"# Home\n{text}\n", "examples.md": "# Examples\n"}
    with pytest.raises(Abort):
        _build(_site(tmp_path, pages, [{"Home": "index.md"}, {"Examples": "examples.md"}]))


def test_real_nav_lists_existing_pages() -> None:
    cfg = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    listed: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, str):
            listed.append(node)
        elif isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, dict):
            for value in node.values():
                walk(value)

    walk(cfg["nav"])
    missing = [p for p in listed if not (ROOT / "docs" / p).exists()]
    assert missing == []


def test_sphinx_roles_render_as_code(tmp_path: Path) -> None:
    pages = {"index.md": "# Home\nSee :class:`~switchyard.api.Switchyard` and :func:`switchyard.load_config`.\n"}
    _build(_site(tmp_path, pages, [{"Home": "index.md"}]))
    html = (tmp_path / "site" / "index.html").read_text()
    assert "<code>Switchyard</code>" in html and "<code>switchyard.load_config</code>" in html
    assert ":class:" not in html and ":func:" not in html
