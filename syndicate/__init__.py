"""Syndicate: joint scheduling and execution planning of a hybrid-parallel job's collectives
(seed 000, thesis chapter 4, T:1321-1810; App. C, T:2044-2108).

A job-side library; nothing in :mod:`arbiter` imports it. Its parts:

* :mod:`syndicate.topology`: the HGX-2-like cluster (NVLink/NVSwitch, PCIe, per-GPU RoCE NICs,
  host NICs) and the two channels ``gpu`` and ``cpu`` (T:1764, T:1804);
* :mod:`syndicate.motifs`: the motif algebra, rules R1-R5 with the errata fixed, and a NumPy
  executor of motifs (the reference semantics the data plane follows);
* :mod:`syndicate.dag`: the training DAG unrolled over two iterations, the DLRM-like workloads
  A1/A2/A3 and the executable fixtures X1-X3;
* :mod:`syndicate.sched`: optSched (Pseudocode 4 lines 10-23, corrected) and the list
  schedulers the baselines use;
* :mod:`syndicate.optimizer`: the MCMC search (Pseudocode 4 lines 1-9) and the baselines as
  configurations (FIFO, LIFO, HO, S-Sched, S-Exec, Syndicate);
* :mod:`syndicate.flowsim`: a flow-level, max-min fair network simulator (ground truth);
* :mod:`syndicate.bridge`: predicted iteration times as Themis slowdowns S(G);
* :mod:`syndicate.dataplane`: the per-rank enforcer on CPU processes (order, 2PC, FIFO
  fallback).
"""
