"""The arbiter's web console: a read-only page over the live arbiter, the RM's UI its model.

The page (``static/``: plain HTML, CSS and JavaScript, no build step, nothing from a CDN) polls
one JSON document, ``GET /api/state``, built here by :func:`console_state` from one consistent
:class:`~arbiter.messages.ArbiterView` and the telemetry's history (:mod:`arbiter.history`):

* the cluster as racks, machines and GPUs (Themis §5.2's topology), with who holds each GPU's
  lease, its source (auction, leftover, policy) and how long it has left;
* apps with their ρ_current over time (Themis Eq. 1) and the GPUs they hold;
* the auction log (Themis §4.3, Pseudocode 1): GPUs offered, each bidder's ρ_old and bid
  size, the proportional-fair winners, c_i and the hidden payment 1 - c_i, the leftover;
* QOOP's share (Pseudocode 1) over time: |J| and R/|J| at each share change, the query
  jobs registered now, and the plan switches their replanners reported (Pseudocode 2);
* the bridge's view of the ResourceManager (its status source: the RM in use, the last poll,
  nodes and apps seen) and the arbiter's health.

Serving it (and who may see it) is :mod:`arbiter.metrics`'s business.
"""

from arbiter.console.state import STATIC_DIR, console_state, static_file

__all__ = ["STATIC_DIR", "console_state", "static_file"]
