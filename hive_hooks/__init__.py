"""hive_hooks: HiveServer2 execution of QOOP plans, checkpoint registry, share subscription.

Placeholder package of the design card's layout; it is built by the Hive execution issue
(``../shared/spec/local-hive-engine.md``). Nothing here is called yet.
"""
