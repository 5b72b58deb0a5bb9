"""hive_hooks: QOOP's replanning on a real HiveServer2.

``engine`` (a local HiveServer2: the Spark Thrift Server from the pyspark wheel), ``tpcload``
(TPC-H / TPC-DS into it), ``executor`` (a plan run stage by stage as CREATE TABLE AS SELECT
checkpoints, switching plans as the share changes), ``registry`` (the durable checkpoint
registry, retention and gc), ``share`` (share sources: the arbiter's stream, scripted profiles),
``cli`` (``qoop-hive``, beeline-like) and ``demo``.
"""
