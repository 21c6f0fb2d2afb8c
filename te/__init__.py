"""Task Executor's client side: the Python SDK (:mod:`te.client`) and the ``te`` command
line (:mod:`te.cli`). Installed into the project's venv by ``make run``/``make test``;
never part of the Lambda package (which is ``app.py`` and ``chalicelib/``)."""
