"""The documentation: links resolve, generated pages match the code, nothing cites the
invisible.

* Every relative link (and image) in README.md and docs/**/*.md names a file of the
  repository, and every ``#anchor`` a heading of the page it points to (GitHub's slugs).
* docs/reference/{settings,errors,endpoints}.md are what ``docs/reference/generate.py``
  makes of the code today.
* No page cites issue numbers or documents a reader cannot see.
* Every metric name docs/reference/metrics.md lists is one the code emits.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([REPO_ROOT / "README.md", *(REPO_ROOT / "docs").rglob("*.md")])
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)


def _generator() -> ModuleType:
    path = REPO_ROOT / "docs" / "reference" / "generate.py"
    spec = importlib.util.spec_from_file_location("docs_reference_generate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _prose(text: str) -> str:
    """The page without its fenced code blocks and inline code spans."""
    text = FENCE.sub("", text)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|<[^>]+>", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = "".join(ch for ch in text if ch.isalnum() or ch in " -")
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*#*$", FENCE.sub("", page.read_text()), re.M)
    found: set[str] = set()
    for heading in headings:
        base = slug(heading)
        name, n = base, 1
        while name in found:
            name, n = f"{base}-{n}", n + 1
        found.add(name)
    return found


def links(page: Path) -> list[str]:
    return [m.group(1) for m in LINK.finditer(_prose_links(page.read_text(encoding="utf-8")))]


def _prose_links(text: str) -> str:
    return FENCE.sub("", text)


def test_the_pages_are_found() -> None:
    names = {p.relative_to(REPO_ROOT).as_posix() for p in PAGES}
    assert {"README.md", "docs/tutorial.md", "docs/how-to/deploy.md"} <= names
    assert len(names) >= 15


def test_the_slugs_are_githubs() -> None:
    assert slug("Check the template offline") == "check-the-template-offline"
    assert slug("`GET /health`") == "get-health"
    assert slug("Rate limits: API Gateway usage plan and API keys") == (
        "rate-limits-api-gateway-usage-plan-and-api-keys"
    )
    assert slug("CockroachDB, kept honest without running it") == (
        "cockroachdb-kept-honest-without-running-it"
    )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
            continue
        if not str(resolved).startswith(str(REPO_ROOT)):
            broken.append(f"{target}: outside the repository")
            continue
        if anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading #{anchor} in {resolved.name}")
    assert not broken, f"{page.relative_to(REPO_ROOT)}: " + "; ".join(broken)


def test_a_broken_link_would_be_found(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n\nSee [here](missing.md) and [there](#title).\n```\n[no](x.md)\n```\n"
    )
    assert links(page) == ["missing.md", "#title"]
    assert anchors(page) == {"title"}


INVISIBLE = [
    (re.compile(r"\bissues? #?\d+", re.I), "an issue number"),
    (re.compile(r"\bthe brief\b", re.I), '"the brief"'),
    (re.compile(r"DESIGN\.md"), "a design document outside the repository"),
    (re.compile(r"\bfor the record\b", re.I), "history kept for the record"),
    (re.compile(r"\bthe spec(?:ification)?'s\b|\bthe spec says\b", re.I), "the specification"),
]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_no_page_cites_what_a_reader_cannot_see(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    found = [f"{what}: {m.group(0)!r}" for rx, what in INVISIBLE for m in rx.finditer(text)]
    assert not found, f"{page.relative_to(REPO_ROOT)}: {found}"


def test_the_generated_reference_pages_match_the_code() -> None:
    generator = _generator()
    assert generator.out_of_step() == [], "run: .venv/bin/python docs/reference/generate.py"


def test_a_setting_without_a_sentence_stops_the_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    generator = _generator()
    title, rows = generator.SETTING_GROUPS[0]
    monkeypatch.setattr(
        generator, "SETTING_GROUPS", [(title, rows[1:]), *generator.SETTING_GROUPS[1:]]
    )
    with pytest.raises(SystemExit, match=rows[0][0]):
        generator.settings_page()


def test_every_setting_and_error_code_of_the_code_is_on_its_page() -> None:
    from dataclasses import fields

    from chalicelib.settings import Settings

    settings_page = (REPO_ROOT / "docs" / "reference" / "settings.md").read_text()
    for field in fields(Settings):
        assert f"`TE_{field.name.upper()}`" in settings_page
    errors_page = (REPO_ROOT / "docs" / "reference" / "errors.md").read_text()
    for code, _status in _generator().error_codes():
        assert f"`{code}`" in errors_page


def test_the_endpoint_page_states_the_defaults_of_the_code() -> None:
    from chalicelib.domain.endpoints import RETRY_DEFAULTS, SPEC_RULES

    page = (REPO_ROOT / "docs" / "reference" / "endpoints.md").read_text()
    assert "| `max_attempts` | `1` |" in page
    assert RETRY_DEFAULTS["max_attempts"] == 1
    for kind, rules in SPEC_RULES.items():
        assert f"## `{kind}`" in page
        timeout = rules["timeout_ms"].default
        assert f"| `timeout_ms` | no | `{timeout}` |" in page


def test_every_metric_the_page_names_is_emitted_by_the_code() -> None:
    page = (REPO_ROOT / "docs" / "reference" / "metrics.md").read_text()
    names = set(re.findall(r"\bte_[a-z_]+", page))
    assert {"te_queue_depth", "te_loop_up", "te_worker_claimed_total"} <= names
    source = "\n".join(p.read_text() for p in (REPO_ROOT / "chalicelib").rglob("*.py"))
    missing = []
    for name in names:
        stem = name.removesuffix("_total")  # counters are declared without the suffix
        if name not in source and f'"{stem}"' not in source:
            missing.append(name)
    assert not missing
