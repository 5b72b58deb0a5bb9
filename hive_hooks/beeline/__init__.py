"""The client side of ``qoop-hive``: a beeline-like HiveServer2 client whose SELECTs are
replanned by QOOP.

A thin shell over :mod:`hive_hooks.executor` (``QueryRunner``: cached plans, stage-by-stage
execution with checkpoint tables, plan switches when the share changes),
:mod:`hive_hooks.registry` (durable checkpoint registry) and :mod:`hive_hooks.share` (where the
query's resource share comes from). Its modules:

* :mod:`~hive_hooks.beeline.errors`: exit statuses, ``CliError``, one-line error descriptions;
* :mod:`~hive_hooks.beeline.args`: the options (beeline's names) and their checks;
* :mod:`~hive_hooks.beeline.script`: reading and splitting scripts, ``${...}`` variables, which
  statements are queries;
* :mod:`~hive_hooks.beeline.session`: the connection and its client-side state, the share
  source, the replanner;
* :mod:`~hive_hooks.beeline.printing`: results, progress lines, the ``--explain-plans`` table;
* :mod:`~hive_hooks.beeline.run`: running a script's statements, then ``--gc``.

Result sets go to stdout, "N rows selected (T seconds)", progress and errors to stderr, as
beeline does. The entry point is :func:`hive_hooks.cli.main`.
"""
