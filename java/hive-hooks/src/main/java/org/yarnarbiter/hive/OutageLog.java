package org.yarnarbiter.hive;

import java.util.concurrent.atomic.AtomicBoolean;

import org.slf4j.Logger;

/**
 * The once-per-outage warning of the hooks that feed Hive queries into the arbiter's max-min
 * share (QOOP's per-query resource feedback). Logs one warning per arbiter outage rather than
 * one per query: the first failure after a success (or at start) is logged as a warning,
 * further failures are not (debug only) until a call succeeds again, which is logged once at
 * info. The hooks keep running queries normally throughout; this only decides what reaches
 * HiveServer2's log.
 */
final class OutageLog {
  /** Where the messages go (slf4j in HiveServer2; a list in the tests). */
  interface Sink {
    void warn(String message);

    void info(String message);

    void debug(String message);
  }

  private final Sink sink;
  private final AtomicBoolean down = new AtomicBoolean(false);

  OutageLog(Sink sink) {
    this.sink = sink;
  }

  static Sink slf4j(final Logger log) {
    return new Sink() {
      @Override
      public void warn(String message) {
        log.warn(message);
      }

      @Override
      public void info(String message) {
        log.info(message);
      }

      @Override
      public void debug(String message) {
        log.debug(message);
      }
    };
  }

  /**
   * A call failed: warns if this starts an outage. Returns true if it was logged as a warning.
   */
  boolean failure(String what, Throwable error) {
    String msg = what + " failed: " + describe(error);
    if (down.compareAndSet(false, true)) {
      sink.warn("yarn-arbiter: " + msg + "; queries run without the arbiter's share until it"
          + " answers again (logged once per outage)");
      return true;
    }
    sink.debug("yarn-arbiter: " + msg);
    return false;
  }

  /** A call succeeded: ends an outage (logged once). */
  void success() {
    if (down.compareAndSet(true, false)) {
      sink.info("yarn-arbiter: the arbiter answers again");
    }
  }

  boolean isDown() {
    return down.get();
  }

  static String describe(Throwable t) {
    if (t == null) {
      return "unknown error";
    }
    String m = t.getMessage();
    String name = t.getClass().getSimpleName();
    Throwable cause = t.getCause();
    String s = m == null ? name : name + ": " + m;
    if (cause != null && cause != t && cause.getMessage() != null
        && (m == null || !m.contains(cause.getMessage()))) {
      s += " (" + cause.getClass().getSimpleName() + ": " + cause.getMessage() + ")";
    }
    return s;
  }
}
