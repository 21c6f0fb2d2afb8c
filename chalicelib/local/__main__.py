"""``python -m chalicelib.local``: the local stack (``make run``), composed in
:mod:`chalicelib.wiring.local`."""

from __future__ import annotations

import sys

from chalicelib.wiring.local import main

if __name__ == "__main__":
    sys.exit(main())
