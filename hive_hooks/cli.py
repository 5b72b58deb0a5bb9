"""``qoop-hive``: the console script's entry point, which hands each command line to the module
that runs it.

* ``qoop-hive [-u URL -e SQL | -f FILE ...]``: a beeline-like HiveServer2 client whose SELECTs
  are replanned by QOOP (:mod:`hive_hooks.beeline`, options in
  :mod:`hive_hooks.beeline.args`);
* ``qoop-hive engine start|stop|status|jars`` and ``qoop-hive beeline``: a local HiveServer2 and
  Hive's own BeeLine (:mod:`hive_hooks.engine_cli`);
* ``qoop-hive load-tpch|load-tpcds``: TPC data loaded as Parquet tables
  (:mod:`hive_hooks.tpc_cli`).

``qoop-hive --help`` has the whole surface with examples. Every failure ends as one line
``qoop-hive: error: ...`` on stderr and an exit status (:mod:`hive_hooks.beeline.errors`): 1 a
failed statement or an unreachable server, 2 a usage error, 3 ``engine status`` of a stopped
engine, 130 Ctrl-C.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

from hive_hooks.beeline.args import build_parser, check_args, parse_args
from hive_hooks.beeline.errors import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    PROG,
    CliError,
    describe_error,
    quiet_client_logs,
)
from hive_hooks.beeline.run import run_sql
from hive_hooks.engine_cli import run_beeline, run_engine
from hive_hooks.tpc_cli import run_load

__all__ = ["main"]


def main(
    argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """The ``qoop-hive`` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    out = out or sys.stdout
    err = err or sys.stderr
    quiet_client_logs()
    if "--version" in argv:  # every subcommand too (engine, beeline, load-tpch, ...)
        from arbiter.about import version_line

        print(version_line(PROG), file=out, flush=True)
        return 0
    try:
        command = argv[0] if argv else ""
        if command == "engine":
            return run_engine(argv[1:], out, err)
        if command == "beeline":
            return run_beeline(argv[1:], out, err)
        if command in ("load-tpch", "load-tpcds"):
            return run_load(command, argv[1:], out, err)
        args = parse_args(build_parser(), argv, out)
        check_args(args)
        return run_sql(args, out, err)
    except SystemExit as e:  # --help, --version
        return int(e.code or 0) if not isinstance(e.code, str) else EXIT_USAGE
    except CliError as e:
        print(f"{PROG}: error: {e}", file=err, flush=True)
        return e.code
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=err, flush=True)
        return EXIT_INTERRUPTED
    except Exception as e:  # broad on purpose: see below
        # The command's top level: any other failure (the server, the client libraries, the
        # planner) ends as one line and exit status 1, never a traceback.
        print(f"{PROG}: error: {describe_error(e)}", file=err, flush=True)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
