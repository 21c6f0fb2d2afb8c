"""The deployment profiles' scheduled Lambda functions: each one's timeout and the settings
it overrides, in one table that the CDK stack deploys (``infra/stacks/task_executor.py``)
and the local stack invokes (``make run PROFILE=lean``, :mod:`chalicelib.wiring.eventbridge`).

``full``
    the scheduler functions loop at their sub-second intervals for about 65 s of a 70 s
    invocation, and the ``run_worker`` function (beside the Fargate worker) claims for
    100 s of 120 s. These are also ``.chalice/config.json``'s timeouts, which a plain
    ``chalice deploy`` uses (tests/unit/test_profiles_table.py keeps the two equal).
``lean``
    the scheduler functions make one pass per minute (10 s budget) looking 75 s ahead, a
    safety net that also runs the reclaimer and the housekeeper; the lone worker Lambda
    claims for 60 s of 80 s and runs the delayed promoter and the cron materializer at
    their own intervals while it claims, so near-term work is on time.

The CDK context can mix the two (``scheduler_loop``, ``worker``): :func:`deployment_functions`
builds the table of any mix, :data:`PROFILES` holds the two named ones.

Pure data: the standard library only, so ``infra/`` imports it without the app's packages
(and a deployed function reads it without loading anything).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

RUN_WORKER = "run_worker"
MATERIALIZE_CRON_TICKS = "materialize_cron_ticks"
PROMOTE_DELAYED_EXECUTIONS = "promote_delayed_executions"
RECLAIM_STUCK_EXECUTIONS = "reclaim_stuck_executions"
#: The scheduler's functions (each EventBridge ``rate(1 minute)``), then the worker's.
SCHEDULER_FUNCTIONS = (MATERIALIZE_CRON_TICKS, PROMOTE_DELAYED_EXECUTIONS, RECLAIM_STUCK_EXECUTIONS)
SCHEDULED_FUNCTIONS = (*SCHEDULER_FUNCTIONS, RUN_WORKER)

#: scheduler_loop=true: a scheduler invocation loops until a fifth of this (at most 5 s)
#: is left, 65 s, so consecutive invocations overlap a little and no second goes unserved.
LOOPING_TIMEOUT_SEC = 70
#: scheduler_loop=false: each invocation makes one pass and returns near the end of this
#: budget (the loop runner waits out its time; it keeps a fifth of it, 2 s, in reserve) ...
ONE_PASS_TIMEOUT_SEC = 10
#: ... and looks this far ahead, so a pass covers the minute until the next one with room
#: for EventBridge's jitter: cron ticks and DELAYED runs due before then are QUEUED with
#: their run_at, and the worker's claim still waits for run_at.
ONE_PASS_LOOKAHEAD_SEC = 75
#: The worker Lambda beside the Fargate worker claims until 20 s are left
#: (chalicelib/worker/lambdas.py): 100 s of every 120 s, so invocations overlap.
SHARED_WORKER_TIMEOUT_SEC = 120
#: The lone worker Lambda (worker=lambda): an 80 s budget claims for the 60 s until the
#: next invocation, one claiming invocation at a time.
LONE_WORKER_TIMEOUT_SEC = 80
#: TE_WORKER_SCHEDULER_LOOPS of a worker Lambda beside one-pass scheduler functions: the
#: loops whose one pass a minute would leave near-term work up to a minute late.
HOSTED_SCHEDULER_LOOPS = "delayed_promoter,cron_materializer"


@dataclass(frozen=True, kw_only=True)
class ScheduledFunction:
    """One scheduled function as a deployment runs it: its Lambda timeout and the ``TE_*``
    settings it overrides (on top of the deployment's common environment)."""

    name: str
    timeout_sec: int
    env: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "env", MappingProxyType(dict(self.env)))


def scheduler_functions(*, looping: bool) -> dict[str, ScheduledFunction]:
    """The three scheduler functions: looping for most of their minute, or one pass."""
    if looping:
        return {
            name: ScheduledFunction(name=name, timeout_sec=LOOPING_TIMEOUT_SEC)
            for name in SCHEDULER_FUNCTIONS
        }
    # One interval is one pass: the look-ahead of both loops is their interval.
    env = {
        MATERIALIZE_CRON_TICKS: {"TE_CRON_TICK_INTERVAL_SEC": str(ONE_PASS_LOOKAHEAD_SEC)},
        PROMOTE_DELAYED_EXECUTIONS: {"TE_PROMOTE_INTERVAL_MS": str(ONE_PASS_LOOKAHEAD_SEC * 1000)},
    }
    return {
        name: ScheduledFunction(name=name, timeout_sec=ONE_PASS_TIMEOUT_SEC, env=env.get(name, {}))
        for name in SCHEDULER_FUNCTIONS
    }


def worker_function(*, alone: bool, hosts_scheduler_loops: bool) -> ScheduledFunction:
    """``run_worker``: alone (no Fargate worker) or beside it; hosting the fast scheduler
    loops when the scheduler functions make one pass a minute."""
    return ScheduledFunction(
        name=RUN_WORKER,
        timeout_sec=LONE_WORKER_TIMEOUT_SEC if alone else SHARED_WORKER_TIMEOUT_SEC,
        env={"TE_WORKER_SCHEDULER_LOOPS": HOSTED_SCHEDULER_LOOPS} if hosts_scheduler_loops else {},
    )


def deployment_functions(
    *, scheduler_loop: bool, lone_worker: bool
) -> dict[str, ScheduledFunction]:
    """Every scheduled function of a deployment shape, by function name."""
    return {
        **scheduler_functions(looping=scheduler_loop),
        RUN_WORKER: worker_function(alone=lone_worker, hosts_scheduler_loops=not scheduler_loop),
    }


#: profile -> function name -> how the profile deploys it.
PROFILES: Mapping[str, Mapping[str, ScheduledFunction]] = MappingProxyType(
    {
        "full": deployment_functions(scheduler_loop=True, lone_worker=False),
        "lean": deployment_functions(scheduler_loop=False, lone_worker=True),
    }
)
