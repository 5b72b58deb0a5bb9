package org.yarnarbiter.hive;

import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.yarnarbiter.hive.ArbiterClient.Registration;

/**
 * The queries this HiveServer2 has registered with the arbiter (QOOP's per-query resource
 * feedback: each running query is one job in the arbiter's max-min share over |J|), keyed by
 * Hive's query id, and the once-per-outage warning. Shared by {@link ArbiterQueryHook} (which
 * registers and unregisters) and {@link ArbiterPlanHook} (which reads the job id).
 *
 * <p>Nothing here throws to Hive: failures are logged (one warning per outage) and the query
 * runs without the arbiter. RegisterQuery and UnregisterQuery run on the hooks' own threads
 * while Hive's thread waits for them (at most the deadline): HiveServer2 interrupts a query's
 * thread when its operation is closed, and an interrupted gRPC call is abandoned, which would
 * leave the query counted. An unregistration that fails (arbiter unreachable) is retried in
 * the background, so an outage does not leave finished queries counted once the arbiter is back.
 * With an active/standby pair of arbiters, a registration fails over to the next address when
 * one does not answer or answers UNAVAILABLE; the job is then unregistered where it was made.
 */
final class Registrations {
  static final Logger LOG = LoggerFactory.getLogger("org.yarnarbiter.hive.ArbiterQueryHook");
  static final OutageLog OUTAGE = new OutageLog(OutageLog.slf4j(LOG));

  /** Registration tried and failed for this query: do not try again for the same execution. */
  static final Registration FAILED = new Registration("", "", null);

  static final Map<String, Registration> BY_QUERY = new ConcurrentHashMap<>();
  static final ConcurrentLinkedQueue<Registration> PENDING_UNREGISTER = new ConcurrentLinkedQueue<>();
  static final int MAX_PENDING = 10_000;
  /** During an outage, how long a query waits for a TCP connection to the arbiter. */
  static final long PROBE_MS = 250;
  /** First delay of the background retry of failed unregistrations (doubling up to 60 s). */
  static volatile long retryDelayMs = 2000;

  private static final AtomicInteger pendingCount = new AtomicInteger();
  private static final AtomicBoolean noAddressLogged = new AtomicBoolean();
  private static final AtomicBoolean retryScheduled = new AtomicBoolean();
  private static final AtomicBoolean retryNowQueued = new AtomicBoolean();
  /**
   * The current outage is one of connectivity: queries first check with a quick TCP connect
   * that something listens at the address, and fail fast if not.
   */
  private static volatile boolean unreachable;
  /** The address that last registered a query (of a pair: the active, as far as we know). */
  private static volatile String preferred;

  private static final ThreadPoolExecutor CALLS = new ThreadPoolExecutor(
      0, 64, 60, TimeUnit.SECONDS, new SynchronousQueue<Runnable>(),
      daemon("yarn-arbiter-call"), new ThreadPoolExecutor.CallerRunsPolicy());
  private static final ScheduledThreadPoolExecutor RETRY =
      new ScheduledThreadPoolExecutor(1, daemon("yarn-arbiter-unregister-retry"));

  static {
    RETRY.setKeepAliveTime(60, TimeUnit.SECONDS);
    RETRY.allowCoreThreadTimeOut(true);
  }

  private Registrations() {}

  private static ThreadFactory daemon(final String name) {
    final AtomicInteger n = new AtomicInteger();
    return r -> {
      Thread t = new Thread(r, name + "-" + n.incrementAndGet());
      t.setDaemon(true);
      return t;
    };
  }

  /** The settings, or null (with one warning per JVM) when yarn.arbiter.address is unset. */
  static ArbiterSettings settings(Function<String, String> conf) {
    ArbiterSettings s;
    try {
      s = ArbiterSettings.from(conf);
    } catch (IllegalArgumentException e) {
      OUTAGE.failure("reading the yarn.arbiter.* settings", e);
      return null;
    }
    if (s == null && noAddressLogged.compareAndSet(false, true)) {
      LOG.warn("yarn-arbiter: " + ArbiterSettings.ADDRESS + " is not set; the arbiter hooks do nothing");
    }
    return s;
  }

  /**
   * Registers the query unless this execution already has a registration (or a failed
   * attempt). Returns the registration, or null if the arbiter did not register it.
   */
  static Registration ensure(final ArbiterSettings s, final String queryId, final String user) {
    if (queryId == null) {
      return null;
    }
    Registration have = BY_QUERY.get(queryId);
    if (have != null) {
      return have == FAILED ? null : have;
    }
    final boolean outage = OUTAGE.isDown() && unreachable;
    Registration r = null;
    Exception failure = null;
    ArbiterSettings at = s;
    for (final ArbiterSettings c : inTurn(s)) {
      at = c;
      if (outage && !ArbiterClient.probe(c, Math.min(c.timeoutMs, PROBE_MS))) {
        failure = new java.net.ConnectException("nothing answers at " + c.address);
        continue;
      }
      try {
        r = call(c, () -> ArbiterClient.register(c, queryId, user == null ? "" : user, outage));
        preferred = c.address;
        break;
      } catch (Exception e) {
        failure = e;
        if (!unreachable(e)) {
          break; // refused (a credential, a limit): another arbiter of the pair would refuse too
        }
      }
    }
    if (r == null) {
      unreachable = failure == null || unreachable(failure)
          || failure instanceof java.net.ConnectException;
      OUTAGE.failure("RegisterQuery for " + queryId + " at " + at.address, failure);
      BY_QUERY.putIfAbsent(queryId, FAILED);
      return null;
    }
    succeeded();
    Registration raced = BY_QUERY.putIfAbsent(queryId, r);
    if (raced != null) { // cannot happen for one execution; do not leak the second one
      unregister(r);
      return raced == FAILED ? null : raced;
    }
    LOG.debug("yarn-arbiter: registered {} as {}", queryId, r.jobId);
    return r;
  }

  /**
   * The arbiters to try, in turn: the one that last registered a query first, then the others
   * in their configured order (an active/standby pair: the standby answers UNAVAILABLE).
   */
  static java.util.List<ArbiterSettings> inTurn(ArbiterSettings s) {
    java.util.List<ArbiterSettings> all = s.candidates();
    String p = preferred;
    java.util.List<ArbiterSettings> order = new java.util.ArrayList<>(all.size());
    for (ArbiterSettings c : all) {
      if (c.address.equals(p)) {
        order.add(c);
      }
    }
    for (ArbiterSettings c : all) {
      if (!c.address.equals(p)) {
        order.add(c);
      }
    }
    return order;
  }

  static Registration get(String queryId) {
    Registration r = queryId == null ? null : BY_QUERY.get(queryId);
    return r == FAILED ? null : r;
  }

  /** The query's execution ended (or failed to compile): it leaves |J|. */
  static void release(String queryId) {
    if (queryId == null) {
      return;
    }
    Registration r = BY_QUERY.remove(queryId);
    if (r != null && r != FAILED) {
      unregister(r);
      LOG.debug("yarn-arbiter: unregistered {} ({})", queryId, r.jobId);
    }
  }

  /** UnregisterQuery; on failure the job is kept for the background retry. */
  static boolean unregister(final Registration r) {
    try {
      call(r.settings, () -> {
        ArbiterClient.unregister(r);
        return null;
      });
    } catch (Exception e) {
      if (notFound(e)) {
        succeeded(); // the arbiter no longer knows the job (e.g. it restarted): nothing to undo
        return true;
      }
      unreachable = unreachable(e);
      OUTAGE.failure("UnregisterQuery for " + r.jobId + " at " + r.settings.address, e);
      addPending(r);
      return false;
    }
    succeeded();
    return true;
  }

  /**
   * Runs a call on the hooks' own thread and waits for it, through interrupts of the calling
   * thread (restored afterwards), for at most the deadline plus a second. The call's own
   * deadline bounds it; if the wait gives up first, the call still completes on its thread.
   */
  static <T> T call(ArbiterSettings s, Callable<T> c) throws Exception {
    Future<T> f = CALLS.submit(c);
    boolean interrupted = false;
    long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(s.timeoutMs + 1000);
    try {
      while (true) {
        try {
          return f.get(Math.max(0, end - System.nanoTime()), TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
          interrupted = true;
        } catch (ExecutionException e) {
          Throwable cause = e.getCause();
          if (cause instanceof Exception) {
            throw (Exception) cause;
          }
          throw e;
        } catch (TimeoutException e) {
          throw new TimeoutException("no answer within " + (s.timeoutMs + 1000) + " ms");
        }
      }
    } finally {
      if (interrupted) {
        Thread.currentThread().interrupt();
      }
    }
  }

  static boolean notFound(Throwable e) {
    return e instanceof StatusRuntimeException
        && ((StatusRuntimeException) e).getStatus().getCode() == Status.Code.NOT_FOUND;
  }

  /** The arbiter did not answer at all (rather than refusing the call). */
  static boolean unreachable(Throwable e) {
    if (e instanceof TimeoutException) {
      return true;
    }
    if (!(e instanceof StatusRuntimeException)) {
      return false;
    }
    Status.Code c = ((StatusRuntimeException) e).getStatus().getCode();
    return c == Status.Code.UNAVAILABLE || c == Status.Code.DEADLINE_EXCEEDED;
  }

  private static void succeeded() {
    unreachable = false;
    OUTAGE.success();
    if (!PENDING_UNREGISTER.isEmpty() && retryNowQueued.compareAndSet(false, true)) {
      RETRY.execute(() -> {
        retryNowQueued.set(false);
        retryPending();
      });
    }
  }

  private static void addPending(Registration r) {
    if (pendingCount.incrementAndGet() <= MAX_PENDING) {
      PENDING_UNREGISTER.add(r);
      scheduleRetry(retryDelayMs);
    } else {
      pendingCount.decrementAndGet();
    }
  }

  private static void scheduleRetry(long delayMs) {
    if (retryScheduled.compareAndSet(false, true)) {
      final long next = Math.min(60_000, Math.max(retryDelayMs, delayMs * 2));
      RETRY.schedule(() -> {
        retryScheduled.set(false);
        if (!retryPending()) {
          scheduleRetry(next);
        }
      }, delayMs, TimeUnit.MILLISECONDS);
    }
  }

  /**
   * Unregisters the jobs whose UnregisterQuery failed before; stops at the first failure.
   * Returns true when none is left.
   */
  static boolean retryPending() {
    for (int n = pendingCount.get(); n > 0; n--) {
      Registration r = PENDING_UNREGISTER.poll();
      if (r == null) {
        break;
      }
      pendingCount.decrementAndGet();
      try {
        ArbiterClient.unregister(r);
      } catch (StatusRuntimeException e) {
        if (!notFound(e)) {
          pendingCount.incrementAndGet();
          PENDING_UNREGISTER.add(r);
          return false;
        }
      } catch (RuntimeException e) {
        // malformed settings etc.: drop it
      }
    }
    return PENDING_UNREGISTER.isEmpty();
  }

  /** At JVM exit: unregister what is still registered, within {@code budgetMs} in all. */
  static void unregisterAll(long budgetMs) {
    long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(budgetMs);
    for (String q : BY_QUERY.keySet()) {
      if (System.nanoTime() > end) {
        return;
      }
      Registration r = BY_QUERY.remove(q);
      if (r != null && r != FAILED) {
        try {
          ArbiterClient.unregister(r);
        } catch (RuntimeException ignored) {
          // best effort
        }
      }
    }
    for (Registration r; System.nanoTime() < end && (r = PENDING_UNREGISTER.poll()) != null; ) {
      try {
        ArbiterClient.unregister(r);
      } catch (RuntimeException ignored) {
        // best effort
      }
    }
  }

  /** Our own thread was interrupted (Hive closing the operation), not an arbiter failure. */
  static boolean interruption(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof InterruptedException) {
        return true;
      }
    }
    return Thread.currentThread().isInterrupted();
  }

  /** For the tests. */
  static void clear() {
    BY_QUERY.clear();
    PENDING_UNREGISTER.clear();
    pendingCount.set(0);
    unreachable = false;
    preferred = null;
    OUTAGE.success();
  }
}
