"""Loop 5: the bulk operator. Works through RUNNING bulk operations, a page per pass.

Each pass takes the RUNNING operation that advanced longest ago (so several take turns)
and runs one page of it (:meth:`~chalicelib.services.operations.OperationService.advance`:
one transaction locks the operation, acts on the page and moves its cursor). After a page
the loop comes straight back, so an operation drains at full speed while each transaction
stays one page; with nothing running a pass is one read of an index of running
operations. Safe with any number of schedulers: a second one on the same operation waits
for the page in flight, then takes the next one.
"""

from __future__ import annotations

from chalicelib.runtime.loop import Progress
from chalicelib.services.operations import OperationService

#: Seconds between passes while no operation is running.
BULK_INTERVAL_SEC = 1.0


class BulkOperator:
    """Advances bulk operations; one :meth:`run_once` per pass."""

    def __init__(self, service: OperationService) -> None:
        self._service = service

    def run_once(self) -> Progress:
        """One page of the operation whose turn it is (``more``: look again at once)."""
        picked = self._service.next_running()
        if picked is None:
            return Progress()
        advanced = self._service.advance(*picked)
        if advanced is None:  # it ended meanwhile (aborted, or another scheduler's last page)
            return Progress(0, more=True)
        operation = advanced.operation
        detail = {
            "operation_id": operation.operation_id,
            "action": operation.action.value,
            "state": operation.state.value,
        }
        return Progress(advanced.read, more=True, detail=detail)
