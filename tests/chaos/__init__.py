"""Long-running fault tests (``make chaos``, marker ``chaos``; excluded from ``make test``)."""
