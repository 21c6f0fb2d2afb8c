"""What every process a test starts is given: the bootstrap API key, the secret encryption
key, and the run's database configuration (:data:`PROFILE`)."""

from __future__ import annotations

import base64
import os

BOOTSTRAP_KEY = "te_test_bootstrap_key_0123456789"

#: The service settings that choose the database configuration a run exercises, taken from
#: the environment pytest starts in. `make test` runs the worker and scheduler tests a
#: second time with CockroachDB's (TE_CLAIM_STRATEGY=conditional_update,
#: TE_WAKEUP_NOTIFY=off) and ``-m "not postgres_only"``; fixtures pass these on to every
#: worker, scheduler and app they build (app_env drops every other inherited TE_ variable).
PROFILE_NAMES = ("TE_CLAIM_STRATEGY", "TE_WAKEUP_NOTIFY")
PROFILE = {name: os.environ[name] for name in PROFILE_NAMES if name in os.environ}

ENCRYPTION_KEY = base64.b64encode(bytes(range(32))).decode()
