"""Task Executor: the Chalice application. It only registers routes and entry points.

- API routes: one Blueprint per resource (``chalicelib.api``), all behind one Lambda.
- Scheduled functions (EventBridge ``rate(1 minute)``): cron materializer, delayed
  promoter, stuck reclaimer, each looping at its sub-minute interval until the invocation's
  time is nearly spent (``chalicelib.scheduler.lambdas``).
- The long-poll worker Lambda (``chalicelib.worker.lambdas``); the same worker runs as a
  long-lived process with ``python -m chalicelib.worker`` (Fargate).
- Under ``chalice local`` only: local-mode defaults and the error envelope for unknown
  routes (``chalicelib.local.adapt_to_chalice_cli``, a no-op in Lambda).
"""

from chalice import Chalice

from chalicelib.api import register_api
from chalicelib.local import adapt_to_chalice_cli
from chalicelib.scheduler import lambdas as scheduler_lambdas
from chalicelib.worker import lambdas as worker_lambdas

app = Chalice(app_name="task-executor")
app.experimental_feature_flags.update(["BLUEPRINTS"])
register_api(app)
app.register_blueprint(scheduler_lambdas.bp)
app.register_blueprint(worker_lambdas.bp)
adapt_to_chalice_cli()
