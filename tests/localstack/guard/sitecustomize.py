"""Loaded at start-up by every Python process with this directory on ``PYTHONPATH`` (the
host-mode LocalStack and what it starts): installs the loopback guard first of all."""

import loopback_guard

loopback_guard.install()
