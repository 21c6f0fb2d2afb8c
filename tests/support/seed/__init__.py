"""Rows written straight into the database for a test to start from: the worker's seeds
(an endpoint, its job and due executions), the scheduler's (jobs and cron due times), the
jobs API's (executions and recorded attempts) and the dead letters'. The HTTP side (an
endpoint registered through the API) is :mod:`tests.support.factories`."""
