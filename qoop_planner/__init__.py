"""qoop_planner: plan enumeration, stage provenance, cost model and greedy replanning (QOOP).

Placeholder package of the design card's layout; it is built by the QOOP planner issue
(``../shared/spec/qoop-themis.md`` part A). Nothing here is called yet.
"""
