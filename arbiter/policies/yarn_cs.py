"""``yarn-cs``: what an operator gets from YARN's Capacity Scheduler today.

Modelled behaviour, decided here since no seed specifies it:

* **Queues.** Each trace queue (a Philly virtual cluster) is a leaf queue with an equal
  guaranteed capacity, elastic up to the whole cluster, no preemption. A free GPU goes to the
  queue furthest below its capacity (lowest used / guaranteed, as the CS orders queues), then to
  the first app of that queue in FIFO order that still asks for containers.
* **No gang scheduling.** An ML app asks for one container per GPU; containers are granted one
  at a time as GPUs free up, wherever they are free (placement-blind, node order). An app holds
  its containers idle until it has all of them (the hoarding the papers criticise) and runs only
  then.
* **Deadlock.** When every GPU is hoarded by incomplete apps and none runs, the youngest hoarders
  give their containers up to the oldest one (an AM timing out and resubmitting); without this
  the real system would hang too.
* CPU and memory follow GPUs proportionally (the CS baseline of Synergy); the simulator does not
  model them separately yet.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from arbiter.policies.base import Decision, FreePool, Snapshot

__all__ = ["YarnCapacity"]


@dataclass(frozen=True)
class YarnCapacity:
    name: str = "yarn-cs"
    preemptive: bool = False  # the simulator may skip calls when no GPU is free
    round_s: float | None = None
    holds_partial_gangs: bool = True  # containers are held one by one (the live driver keeps them)

    def decide(self, snapshot: Snapshot[None]) -> Decision[None]:
        alloc = {j.job_id: j.held for j in snapshot.jobs if j.held}
        pool = FreePool(snapshot.cluster, snapshot.free)
        used: Counter[str] = Counter()
        pending: dict[str, list] = {}
        for job in snapshot.jobs:
            used[job.queue] += len(job.held)
            if len(job.held) < job.gang:
                pending.setdefault(job.queue, []).append(job)
        queues = {j.queue for j in snapshot.jobs}
        guaranteed = snapshot.cluster.num_gpus / max(1, len(queues))
        while pool.size and pending:
            queue = min(pending, key=lambda q: (used[q] / guaranteed, q))
            job = pending[queue][0]
            held = alloc.get(job.job_id, frozenset())
            got = pool.take_any(job.gang - len(held), job.perf)
            if not got:  # nothing free this job can use: the queue waits
                del pending[queue]
                continue
            alloc[job.job_id] = held | got
            used[queue] += len(got)
            if len(alloc[job.job_id]) >= job.gang:
                pending[queue].pop(0)
                if not pending[queue]:
                    del pending[queue]
        if pool.size == 0 and not any(
            len(g) >= j.gang for j in snapshot.jobs if (g := alloc.get(j.job_id))
        ):
            hoarders = [j for j in snapshot.jobs if alloc.get(j.job_id)]
            if len(hoarders) > 1:
                oldest, rest = hoarders[0], hoarders[:0:-1]  # youngest give first
                need = oldest.gang - len(alloc[oldest.job_id])
                for victim in rest:
                    if need <= 0:
                        break
                    give = sorted(alloc[victim.job_id])[:need]
                    alloc[victim.job_id] = alloc[victim.job_id] - set(give)
                    alloc[oldest.job_id] = alloc[oldest.job_id] | set(give)
                    need -= len(give)
        return Decision({k: v for k, v in alloc.items() if v})
