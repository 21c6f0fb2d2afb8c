"""Print the table of chaos figures (``make chaos`` runs this after the tests)."""

from __future__ import annotations

import json
import sys

from tests.chaos.figures import RESULTS

COLUMNS = ("created", "delivered", "duplicated", "lost", "stuck", "duration_s")
FUZZ_COLUMNS = ("requests", "server_errors", "nonconforming", "duration_s")


def _row(cells: list[str], widths: list[int]) -> str:
    pairs = enumerate(zip(cells, widths, strict=True))
    return "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in pairs)


def table(columns: tuple[str, ...], rows: list[tuple[str, dict[str, object]]]) -> str:
    cells = [["test", *columns]] + [[n, *(str(d.get(c, "")) for c in columns)] for n, d in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
    return "\n".join(_row(r, widths) for r in cells)


def main() -> int:
    files = sorted(RESULTS.glob("*.json"))
    if not files:
        print(f"no figures in {RESULTS}")
        return 0
    loaded = [(f.stem, json.loads(f.read_text(encoding="utf-8"))) for f in files]
    faults = [(n, d) for n, d in loaded if "created" in d]
    fuzz = [(n, d) for n, d in loaded if "requests" in d]
    print(f"\nChaos figures ({RESULTS}):\n")
    if faults:
        print(table(COLUMNS, faults) + "\n")
    if fuzz:
        print(table(FUZZ_COLUMNS, fuzz) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
