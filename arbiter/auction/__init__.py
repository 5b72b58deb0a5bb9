"""Partial-allocation (PA) auction over GPU bids (Themis §3.3, Pseudocode 1; thesis Pseudocode 3).

Cole-Gkatzelis-Goel partial allocation with hidden payments, on whole GPUs::

    G_pf     = argmax over disjoint rows (one per app) of  Π_i 1/ρ_i(G_i)      (proportional fair)
    G_pf^-i  = the same market without app i
    c_i      = Π_{j≠i} 1/ρ_j(G_j,pf) / Π_{j≠i} 1/ρ_j(G^-i_j,pf)   in (0, 1]
    L        = what the hidden payments 1 - c_i leave over

Each app's bid is a table of rows ``{GPU set: ρ with that set}``; the empty set carries ρ_old
(Table 1, T:906-919). The solver is exact: a 0/1 program (one binary per bid row, one row per
app, each GPU used at most once) minimising ``Σ log ρ`` (= maximising Π 1/ρ), solved with HiGHS
(``highspy``), or by enumeration when a conflict component is tiny. ``brute_force_pf`` is the
independent reference the tests cross-check against.

Speed comes from the problem's structure, not from approximations:

* rows with ρ >= ρ_old can never be chosen over the empty row in an optimum that frees GPUs, so
  they are dropped (the optimum value is unchanged);
* apps whose rows share no GPU form independent *conflict components*, solved separately, and
  removing app i only changes its own component;
* c_i = 1 with no solve when G_i,pf is empty, when no other app has a row touching G_i,pf (a
  better market without i would then be compatible with G_i,pf and improve G_pf, a
  contradiction), or when every other app already holds its best row;
* each component is one HiGHS model reused for the PF solve and all its ``-i`` solves (bound
  changes, warm dual simplex). Clique cuts are separated and kept, so the LP is integral far
  more often; an integral LP optimum is the 0/1 optimum. ``Solver.CLIQUES`` grows each
  fractional row into a maximal clique of the conflict graph (rows of one app, or sharing a
  GPU); the older ``Solver.PAIRS`` (selectable through :func:`partial_allocation`'s
  ``solver``, like CLIQUES) only joins a row with the rows of one other app,
  which leaves the symmetric tails (equal-ρ rows of three or more apps around the same
  machines) fractional. Otherwise a small LP branch and bound runs, then HiGHS's MILP,
  whose answer is checked (disjoint rows costing the optimum HiGHS reports) before use.
  Each ``-i`` solve starts from the PF rows of the others (improved by local moves) as
  incumbent and requires the starving apps the PF served (Gap 2 below), which keeps ρ = ∞
  out of its LP. The ``-i`` MILP fallbacks run on two worker threads (HiGHS releases the
  GIL), over the columns reduced-cost fixing leaves free;
* the default solver (``Solver.DUALS``) is CLIQUES plus dual certificates
  (:mod:`arbiter.auction.certify`): Lagrangian bounds of every market without one app, from
  one LP's duals, settle c_i = 1 without a solve when they reach the others' PF rows (most
  of the ``-i`` solves at 64 apps x 256 GPUs), and the PF requires every starving app when a
  greedy allocation serves them all (Gap 2: then every optimum does); when no clique cut is
  violated it separates zero-half cuts (:mod:`arbiter.auction.zerohalf`), which make the
  half-integral LPs of the symmetric tail integral, except at the root of a ``-i`` solve,
  where it reads Gomory mixed-integer cuts off the optimal basis instead
  (:mod:`arbiter.auction.gomory`, valid for that solve only), fixes columns by reduced cost
  at each solve's root and rounds fractional LP points into incumbents (a node stops
  separating once its bound meets one).
  Where the Lagrangian bound is the optimum without i, exchange chains under the same prices
  (:mod:`arbiter.auction.exchange`) find an allocation that meets it, and c_i needs no solve
  either. The PF's first LP starts at the basis of a greedy allocation, and with four or more
  ``-i`` solves left every other one runs on a second thread, on a clone of the market;
* tiny components are enumerated.

The PF allocation is solved to optimality (gap 1e-9 in Σ log ρ). The ``-i`` solves, which only
set c_i, stop within ``PAYMENT_GAP`` = 1e-4, so each c_i is exact up to a factor e^(1e-4), never
below its true value (at most 0.06 s of a 10-minute lease).

Decisions where the papers are silent (spec B.5):

* **Gap 1, fractional c_i on indivisible GPUs.** Default ``Rounding.LEASE_TIME``: app i holds its
  whole PF set G_i,pf for the fraction c_i of the lease (the placement it valued is kept); for
  the remaining 1 - c_i those GPUs are leftover. ``Rounding.COUNT`` is the alternative: i keeps
  its best bid row inside G_i,pf of at most floor(c_i |G_i,pf|) GPUs for the whole lease, the rest
  is leftover. Either way ``PAResult.leftover`` maps each leftover GPU to the fraction of the lease
  it is free for (1.0 = the whole lease; GPUs no PF row used are always 1.0).
* **Gap 2, ρ = ∞** (an app that holds nothing makes no progress; T:1013). ``inf`` is accepted
  (for any row) and the PF objective is lexicographic: first maximise the number of apps with
  finite ρ, then Π 1/ρ over them. (Encoded exactly: an infinite row costs more than the sum of
  all finite |log ρ| in the auction.) A plain cap such as ρ_max = 1e6 was tried and rejected: as
  soon as one starving app cannot be served, every app whose GPUs it could use gets c_i ≈ 1e-6
  and nearly all GPUs become leftover. So the market for the hidden payments is the apps the PF
  leaves with finite ρ: an app still at ρ = ∞ lost this round (its ρ keeps growing and filtering
  brings it back, T:1013) and is not counted in c_i. With finite ρ_old everywhere this is exactly
  Cole-Gkatzelis-Goel PA.

Bad input raises ``ValueError`` naming the app, the row and the field; nothing is allocated.

Layout of the package (every public name is importable from ``arbiter.auction``):

* :mod:`arbiter.auction.model`: the bid table (spec B.4) and the auction's result;
* :mod:`arbiter.auction.formulation`: the 0/1 program (costs log ρ, Gap 2), conflict components;
* :mod:`arbiter.auction.solve`: HiGHS (clique cuts, LP branch and bound, MILP) and enumeration
  (:class:`Solver` picks the cuts);
* :mod:`arbiter.auction.certify`: dual certificates of c_i = 1 (``Solver.DUALS``);
* :mod:`arbiter.auction.zerohalf`: {0, ½}-Chvátal-Gomory cuts (``Solver.DUALS``);
* :mod:`arbiter.auction.gomory`: Gomory mixed-integer cuts at a ``-i`` solve's root
  (``Solver.DUALS``), and :mod:`arbiter.auction.rows`, the warm LP's rows kept beside HiGHS;
* :mod:`arbiter.auction.payments`: the PF allocation and the hidden payments c_i;
* :mod:`arbiter.auction.leftover`: Gap 1, from c_i to whole GPUs and the leftover L;
* :mod:`arbiter.auction.mechanism`: :func:`partial_allocation`, the one-shot PA auction;
* :mod:`arbiter.auction.reference`: exhaustive references for the tests.

The auction reads no clock of its own: a time budget is measured on the ``clock`` argument of
:func:`partial_allocation` (default :func:`time.monotonic`). Its effects besides its result:
:func:`quiet_highs` points file descriptor 1 at /dev/null while HiGHS constructs its first
instance of the process (the banner no HiGHS option can silence), and Python's cyclic garbage
collector is paused while an auction runs (on again after it if it was on before; see
``mechanism._collector_paused``). An auction may run threads of its own (at most three, ended
before it returns): the ``-i`` solves' second thread and HiGHS's MILP fallbacks. Every HiGHS
it makes, and every one :func:`quiet_highs` makes, runs single-threaded: HiGHS's scheduler is
one per process and fails solves that ask it for another thread count than its first.
"""

from __future__ import annotations

from arbiter.auction.mechanism import partial_allocation
from arbiter.auction.model import RHO_MAX, RHO_MIN, Bid, PAResult, Rounding, Solver
from arbiter.auction.payments import PAYMENT_GAP
from arbiter.auction.reference import brute_force_payments, brute_force_pf
from arbiter.auction.solve import quiet_highs

__all__ = [
    "PAYMENT_GAP",
    "RHO_MAX",
    "RHO_MIN",
    "Bid",
    "PAResult",
    "Rounding",
    "Solver",
    "brute_force_payments",
    "brute_force_pf",
    "partial_allocation",
    "quiet_highs",
]
