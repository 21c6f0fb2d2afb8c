"""The scheduler: cron tick materializer, delayed promoter, stuck reclaimer, housekeeper,
bulk operator.

The loops live in ``materializer``, ``promoter``, ``reclaimer``, ``housekeeper`` and
``bulk``;
``loops`` builds each from its settings and runs any subset of them as one
:class:`~chalicelib.scheduler.loops.Scheduler` (a loop group on :mod:`chalicelib.runtime`).
Entry points: ``python -m chalicelib.scheduler`` (every loop, long-lived), the local stack
(:mod:`chalicelib.wiring.local`) and the scheduled Lambda functions
(:mod:`chalicelib.wiring.lambdas`, one loop each; ``lambdas`` says how they split their
minute). The composition root (:mod:`chalicelib.wiring.scheduler`) builds them all.
"""
