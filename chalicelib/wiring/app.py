"""The Chalice app: the API routes over an :class:`~chalicelib.wiring.api.ApiRoot`, and the
scheduled functions (:mod:`chalicelib.wiring.lambdas`).

One app per process (Chalice registers a module's blueprint on one app only): ``app.py``
builds it at import (nothing is read or connected until the first request); the local
stack builds it over the root its worker and scheduler share. A test that pretends to be a
new process gives the app a new root (:meth:`~chalicelib.api.context.ApiApp.use`).
"""

from __future__ import annotations

import os

from chalicelib.api import register_api
from chalicelib.api.context import ApiApp
from chalicelib.wiring import lambdas
from chalicelib.wiring.api import ApiRoot
from chalicelib.wiring.process import ProcessRoot

APP_NAME = "task-executor"


def build_app(process: ProcessRoot | None = None) -> ApiApp:
    """The app with every route and scheduled function; under ``chalice local`` also its
    local-mode defaults and the error envelope for unknown routes (a no-op in Lambda)."""
    app = ApiApp(APP_NAME, ApiRoot(process or ProcessRoot()))
    app.experimental_feature_flags.update(["BLUEPRINTS"])
    register_api(app)
    app.register_blueprint(lambdas.bp)
    # Chalice's CLI sets AWS_CHALICE_CLI_MODE (its documented way to tell itself from
    # Lambda); only then is the local server's module imported: the deployed app never is.
    if os.environ.get("AWS_CHALICE_CLI_MODE") == "true":
        from chalicelib.local.server import adapt_to_chalice_cli

        adapt_to_chalice_cli()
    return app
