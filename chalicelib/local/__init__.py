"""The local stack's own modules: what ``make run`` and ``chalice local`` need and a Lambda
never imports.

* :mod:`chalicelib.local.__main__`: ``python -m chalicelib.local``, the stack composed in
  :mod:`chalicelib.wiring.local`;
* :mod:`chalicelib.local.server`: Chalice's local server for the API, hardened, and what
  ``chalice local`` needs;
* :mod:`chalicelib.local.http`: the strict HTTP framing and limits that server uses;
* :mod:`chalicelib.local.data`: the data directory (embedded database, generated keys).
"""
