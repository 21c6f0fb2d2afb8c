"""Stand-in for the real ``app.py``, used by the infra tests while the real one cannot import.

It registers exactly the entry points that ``infra/`` deploys (the contract in
``docs/how-to/deploy.md``): the API Lambda and four ``rate(1 minute)`` scheduled functions. The
handlers do nothing; only their names and triggers matter to the packaging.
"""

from typing import Any

from chalice import Chalice

app = Chalice(app_name="task-executor")


@app.route("/health")
def health() -> dict[str, str]:
    """A route, so that ``chalice package`` emits the REST API and ``api_handler``."""
    return {"status": "ok"}


@app.schedule("rate(1 minute)")
def materialize_cron_ticks(event: Any) -> None:
    """Stand-in for the cron materializer."""


@app.schedule("rate(1 minute)")
def promote_delayed_executions(event: Any) -> None:
    """Stand-in for the delayed promoter."""


@app.schedule("rate(1 minute)")
def reclaim_stuck_executions(event: Any) -> None:
    """Stand-in for the stuck reclaimer."""


@app.schedule("rate(1 minute)")
def run_worker(event: Any) -> None:
    """Stand-in for the long-poll worker Lambda."""
