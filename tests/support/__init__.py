"""What the tests share: waiting for a state (:mod:`.waiting`), request bodies for the
catalogue and jobs (:mod:`.factories`), rows seeded into the database (:mod:`.seed`), and
the real services they run against (:mod:`.pg`: PostgreSQL; :mod:`.served`: Redis, the
Kafka-protocol broker, HTTP targets; :mod:`.netguard`: nothing leaves loopback).

Beside them: the keys and database configuration every process gets (:mod:`.environment`),
the app called in-process (:mod:`.api_client`) over this test's process roots
(:mod:`.roots`), a clock the test moves (:mod:`.clock`), a worker driven until its
executions end (:mod:`.worker_runs`), ``te`` against a stack (:mod:`.cli`), the dashboard's
stack and browser (:mod:`.browser_stack`), and the infra tests' syntheses (:mod:`.infra`).

Test files import from here rather than keeping their own copies, so a wait fails the
same way everywhere (naming what it waited for and the last value it saw). No test imports
a conftest: those hold only fixtures and hooks (tests/unit/test_test_support.py).
"""
