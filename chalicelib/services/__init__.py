"""Use cases behind the API: one service per resource, one transaction per use case.

Services take their collaborators as arguments (the database pool, the service clock, the
secret keyring); the composition root builds them per process
(:class:`chalicelib.wiring.api.ApiRoot`) and the routes reach them through their resource.
"""
