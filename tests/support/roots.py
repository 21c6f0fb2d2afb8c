"""The process roots one test builds (:class:`Roots`), behind the ``roots`` fixture."""

from __future__ import annotations

from typing import Any


class Roots:
    """The process roots one test builds: one per process it pretends to be (a restart
    after the environment changed is a new root); every pool is closed at the end."""

    def __init__(self) -> None:
        from chalicelib.wiring.process import ProcessRoot

        self.built: list[ProcessRoot] = []

    def new(self) -> Any:
        """A new process: settings, pools and keys read afresh from the environment."""
        from chalicelib.wiring.process import ProcessRoot

        root = ProcessRoot()
        self.built.append(root)
        return root

    @property
    def current(self) -> Any:
        """The latest process (the first one is built on first use)."""
        return self.built[-1] if self.built else self.new()

    def close(self) -> None:
        for root in self.built:
            root.close()
