"""Launch ``python -m chalicelib.worker`` with pg8000's ``to_statement`` memoized.

Only for the A/B in ``statement_cache_ab.py``: it shows what suggestion 1 in
bench/README.md is worth without editing the project's code.
"""

import functools
import runpy

import pg8000.native as native

native.to_statement = functools.lru_cache(maxsize=512)(native.to_statement)
runpy.run_module("chalicelib.worker", run_name="__main__", alter_sys=True)
