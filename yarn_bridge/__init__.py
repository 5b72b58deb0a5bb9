"""yarn_bridge: the link between the arbiter and the YARN ResourceManager.

* :mod:`yarn_bridge.rm`: the typed RM REST client (``RMClient`` / ``AsyncRMClient``): cluster
  info and metrics, Capacity / Fair Scheduler queues, nodes with ``yarn.io/gpu`` capacity,
  apps (list, get, kill, move, priority, lifetime), new-application and submission, scheduler
  configuration mutation; RM HA, retries with a deadline, simple auth and a SPNEGO hook.
* :mod:`yarn_bridge.emulator`: an RM emulator with Hadoop 3.3 / 3.4 JSON shapes over a
  simulated GPU cluster, with faults on demand (outage, slowness, malformed answers, restart,
  HA failover), for tests and demos; ``yarn-arbiter emulate-rm`` (:mod:`yarn_bridge.cli`).
* :mod:`yarn_bridge.auth`: SPNEGO / Kerberos auth hooks for the RM client from the command
  line (``--rm-auth-header-command``, ``--rm-auth-hook``, ``--principal``/``--keytab``).
* :mod:`yarn_bridge.kerberos`: a keytab login into a private credential cache and SPNEGO on
  every RM call; :mod:`yarn_bridge.keytab`: keytab files read without a Kerberos library.
* :mod:`yarn_bridge.env`: environment names shared with ``yarn-arbiter submit`` and the AMs.

Spec: ``../shared/spec/yarn-hive-integration.md`` §1-§2.
"""
