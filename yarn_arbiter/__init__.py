"""The composition root: the ``yarn-arbiter`` command line and the process wiring that puts the
arbiter (:mod:`arbiter`), the YARN bridge (:mod:`yarn_bridge`) and the metrics page together.

Only this package knows every part; :mod:`arbiter` imports none of the others (but
:mod:`protos`), and the bridge reaches the arbiter's core through
:class:`yarn_bridge.arbiter_port.ArbiterPort`.
"""
