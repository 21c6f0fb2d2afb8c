"""Task Executor: the Chalice application (composed in ``chalicelib.wiring.app``).

- API routes: one Blueprint per resource (``chalicelib.api``), all behind one Lambda.
- Scheduled functions (EventBridge ``rate(1 minute)``, ``chalicelib.wiring.lambdas``): cron
  materializer, delayed promoter, stuck reclaimer, each looping at its sub-minute interval
  until the invocation's time is nearly spent, and the long-poll worker; the same worker
  runs as a long-lived process with ``python -m chalicelib.worker`` (Fargate).
- Under ``chalice local`` only: local-mode defaults and the error envelope for unknown
  routes (``chalicelib.local.server.adapt_to_chalice_cli``, never imported in Lambda).
"""

from chalicelib.wiring.app import build_app

app = build_app()
