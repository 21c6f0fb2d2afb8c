"""No tracked file cites a ticket: a comment, docstring or page says the rule itself.

The tracker is not in the repository, so a ticket number tells a reader nothing; the
sentence has to say what must hold. Every file git tracks is read (text files; the .git
directory is not tracked), code, SQL, tests, bench, docs and Makefiles alike.

One exception, which cannot be avoided: migrations already applied. The runner records
each migration's checksum and refuses a file that changed after it was applied
(``chalicelib/db/migrate.py``), so rewording their header comments would stop every
deployed database from migrating. They are listed by name below; a new migration is not,
and each listed one must still hold a reference (or it leaves the list).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

#: The word for a ticket (any case, "s" or not) then its number, spaced, with "#" or not;
#: or "point N of" that word.
TICKET = re.compile(r"\bissues? ?#?\d|\bpoints? \d+ of (?:the )?issue\b", re.IGNORECASE)

#: Applied migrations whose header comments name a ticket: their checksums are recorded in
#: deployed databases, so they cannot be edited (see the module docstring).
APPLIED_MIGRATIONS = {
    "migrations/003_execution_leases.sql",
    "migrations/004_due_index.sql",
    "migrations/005_batches.sql",
    "migrations/006_operator_controls.sql",
    "migrations/007_dead_letters.sql",
    "migrations/008_signing_rotation.sql",
    "migrations/009_metrics.sql",
    "migrations/011_loop_faults.sql",
}


def tracked_texts() -> dict[str, str]:
    """Every tracked file that exists and reads as UTF-8 text, by its repository path."""
    names = (
        subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True)
        .stdout.decode()
        .split("\0")
    )
    texts = {}
    for name in filter(None, names):
        path = REPO_ROOT / name
        if not path.is_file():
            continue
        try:
            texts[name] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # images, archives
    return texts


def references(text: str) -> list[str]:
    """Each line of ``text`` that cites a ticket, as ``"<line>: <text>"``."""
    return [
        f"{number}: {line.strip()}"
        for number, line in enumerate(text.splitlines(), 1)
        if TICKET.search(line)
    ]


def test_the_pattern_finds_each_form_and_nothing_else() -> None:
    ticket = "iss" + "ue"  # spelt apart, so this file cites nothing itself
    for cited in (
        f"(see {ticket} 15)",
        f"{ticket.title()} 26 asks",
        f"{ticket}s 14 and 15",
        f"{ticket} #18, point 3",
        f"({ticket}15)",
        f"point 6 of {ticket} 16",
        f"point 6 of the {ticket}",
    ):
        assert references(cited), cited
    for plain in (f"a known {ticket} with SKIP LOCKED", f"{ticket}d 3 keys", "tissue 4"):
        assert not references(plain), plain


def test_no_tracked_file_cites_a_ticket() -> None:
    texts = tracked_texts()
    assert "Makefile" in texts and "chalicelib/db/sql/worker.sql" in texts
    found = {
        name: lines
        for name, text in texts.items()
        if name not in APPLIED_MIGRATIONS and (lines := references(text))
    }
    assert found == {}, "say the rule the ticket stood for instead"


def test_every_excepted_migration_is_applied_history_that_still_cites() -> None:
    texts = tracked_texts()
    newest = max(name for name in texts if re.fullmatch(r"migrations/\d{3}_\w+\.sql", name))
    for name in sorted(APPLIED_MIGRATIONS):
        assert name in texts, f"{name} is gone: take it off the list"
        assert references(texts[name]), f"{name} cites nothing now: take it off the list"
        assert name < newest, f"{name} is the newest migration: reword it instead"
