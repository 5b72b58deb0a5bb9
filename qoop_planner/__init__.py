"""qoop_planner: plan enumeration, stage provenance, cost model and greedy replanning (QOOP).

Pure library code (no I/O), spec ``../shared/spec/qoop-themis.md`` part A:

* :mod:`qoop_planner.model`: plans as DAGs of stages with provenance and canonical signatures;
* :mod:`qoop_planner.joingraph`, :mod:`qoop_planner.sqlplan`, :mod:`qoop_planner.cost`: the join
  graph of a Hive query (sqlglot), top-k left-deep and bushy plans without cross products, the
  per-stage cost model refined by measured history;
* :mod:`qoop_planner.packing`, :mod:`qoop_planner.replan`: completion-time estimates by simulated
  Tetris packing inside the current share, greedy replanning with hysteresis and backtracking;
* :mod:`qoop_planner.online`: Pseudocode 2 in the a x b model (theory, property tests).
"""

from qoop_planner.cost import CostConfig, History, StageMeasurement, TableStats
from qoop_planner.joingraph import JoinGraph, JoinPredicate, extract_join_graph
from qoop_planner.sqlplan import enumerate_plans, plans_for_graph

__all__ = [
    "CostConfig",
    "History",
    "JoinGraph",
    "JoinPredicate",
    "StageMeasurement",
    "TableStats",
    "enumerate_plans",
    "extract_join_graph",
    "plans_for_graph",
]
