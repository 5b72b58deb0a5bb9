"""Retrying with backoff: the one loop behind every reconnect and retry of the project's clients.

Two parts:

* :class:`Backoff`, the policy: the pause after the ``k``-th consecutive failure is
  ``min(maximum, initial * factor**k)``, shortened by up to ``jitter`` (a fraction) with a random
  draw from an injectable ``rng``; without jitter the pauses are deterministic.
* :class:`Retry`, the loop: iterating over it yields attempt numbers (1, 2, ...) and pauses
  between them. The caller's body is one attempt; it leaves the loop on success or on a failure
  it gives up on (``break``, ``return`` or ``raise``), and calls :meth:`Retry.reset` after
  progress (a stream that delivered messages), so the next pause starts again from ``initial``.
  The loop itself ends when ``max_attempts`` attempts were made, when the ``deadline`` (an instant
  on ``clock``) has passed, or when the ``stop`` event is set; :attr:`Retry.outcome` says which.
  A pause never runs past the deadline (it is clipped), and no attempt starts at or after it.
  ``sleep`` is injectable; with a ``stop`` event the default pause is ``stop.wait``, so stopping
  interrupts it.

Nothing is logged here: each caller logs its own attempts.

>>> slept = []
>>> retry = Retry(Backoff(initial=0.1, factor=2, maximum=0.3), max_attempts=4, sleep=slept.append)
>>> for attempt in retry:
...     print("attempt", attempt)
attempt 1
attempt 2
attempt 3
attempt 4
>>> slept, retry.outcome
([0.1, 0.2, 0.3], 'attempts')

Leaving the loop on success makes no further pause:

>>> slept.clear()
>>> for attempt in Retry(Backoff(initial=1.0), sleep=slept.append):
...     if attempt == 3:
...         break
>>> slept
[1.0, 2.0]
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["STREAM_RECONNECT", "Backoff", "Outcome", "Retry"]

#: Why a :class:`Retry` loop ended on its own (``None`` while running or after a ``break``).
Outcome = Literal["attempts", "deadline", "stopped"]


@dataclass(frozen=True)
class Backoff:
    """Pause after the ``k``-th consecutive failure (``k`` from 0):
    ``min(maximum, initial * factor**k)``, times ``1 - jitter * rng()`` (``rng`` draws from
    ``[0, 1)``; it is not called when ``jitter`` is 0).

    >>> [Backoff(initial=0.1, factor=2, maximum=5).delay(k) for k in (0, 1, 5, 6, 10_000)]
    [0.1, 0.2, 3.2, 5, 5]
    >>> Backoff(initial=1, jitter=0.5, rng=lambda: 0.5).delay(0)
    0.75
    """

    initial: float = 0.1
    factor: float = 2.0
    maximum: float = 5.0
    jitter: float = 0.0
    rng: Callable[[], float] = field(default=random.random, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.initial < 0 or self.maximum < 0:
            raise ValueError(f"initial and maximum must be >= 0, got {self}")
        if self.factor < 1:
            raise ValueError(f"factor must be >= 1, got {self.factor}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter must be in [0, 1], got {self.jitter}")

    def delay(self, failures: int) -> float:
        """The pause after ``failures + 1`` consecutive failures (``failures`` >= 0)."""
        try:
            pause = min(self.maximum, self.initial * self.factor**failures)
        except OverflowError:  # factor**failures beyond a float: long past the cap
            pause = self.maximum
        if self.jitter:
            pause *= 1.0 - self.jitter * self.rng()
        return pause


#: A server stream's reconnect: 0.1 s doubling to 5 s (the Agent's session, the share stream).
STREAM_RECONNECT = Backoff(initial=0.1, factor=2.0, maximum=5.0)


class Retry:
    """Attempts with :class:`Backoff` pauses between them (module docstring). One loop at a
    time per instance; iterating again starts afresh."""

    def __init__(
        self,
        backoff: Backoff = STREAM_RECONNECT,
        *,
        max_attempts: int | None = None,
        deadline: float | None = None,
        stop: threading.Event | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] | None = None,
    ) -> None:
        if max_attempts is not None and max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
        self.backoff = backoff
        self.max_attempts = max_attempts
        self.deadline = deadline
        self.stop = stop
        self.clock = clock
        self._sleep = sleep
        self.outcome: Outcome | None = None
        self._failures = 0

    def reset(self) -> None:
        """Progress was made: the next pause is ``backoff.initial`` again."""
        self._failures = 0

    def _pause(self, seconds: float) -> None:
        if self._sleep is not None:
            self._sleep(seconds)
        elif self.stop is not None:
            self.stop.wait(seconds)
        else:
            time.sleep(seconds)

    def _ended(self) -> Outcome | None:
        if self.stop is not None and self.stop.is_set():
            return "stopped"
        if self.deadline is not None and self.clock() >= self.deadline:
            return "deadline"
        return None

    def __iter__(self) -> Iterator[int]:
        self.outcome = None
        self._failures = 0
        attempt = 0
        while True:
            if (why := self._ended()) is not None:
                self.outcome = why
                return
            attempt += 1
            yield attempt
            if self.max_attempts is not None and attempt >= self.max_attempts:
                self.outcome = "attempts"
                return
            pause = self.backoff.delay(self._failures)
            self._failures += 1
            if self.deadline is not None:
                pause = min(pause, max(0.0, self.deadline - self.clock()))
            if pause > 0:
                self._pause(pause)
