package org.yarnarbiter.hive;

import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.ql.QueryPlan;
import org.apache.hadoop.hive.ql.exec.Utilities;
import org.apache.hadoop.hive.ql.hooks.HookContext;
import org.apache.hadoop.hive.ql.hooks.QueryLifeTimeHook;
import org.apache.hadoop.hive.ql.hooks.QueryLifeTimeHookContext;

/**
 * A {@link QueryLifeTimeHook} ({@code hive.query.lifetime.hooks}) that makes every Hive query
 * that runs on the cluster (a Tez or MapReduce task) one job of the arbiter's QueryShare
 * service while it executes (QOOP's per-query resource
 * feedback: the arbiter's max-min share R / |J| is over the registered queries).
 *
 * <p>{@code beforeExecution} registers the query (RegisterQuery, {@code x-service-token}),
 * {@code afterExecution} unregisters it (UnregisterQuery, {@code x-app-token}). Hive 4.0.1's
 * {@code Executor.execute} calls {@code afterExecution} from its {@code finally} block, so a
 * query that fails or is cancelled while executing is unregistered as well; a query whose
 * compilation fails never executed and was never registered, but {@code afterCompile} with an
 * error releases any registration kept under that query id all the same. Registrations are
 * kept in a static map keyed by Hive's query id.
 *
 * <p>Never breaks a query: every call has the {@code yarn.arbiter.timeout.ms} deadline, every
 * failure is caught and logged once per outage. List this hook first in
 * {@code hive.query.lifetime.hooks}: Hive stops calling the hooks of that list at the first
 * one that throws.
 */
public class ArbiterQueryHook implements QueryLifeTimeHook {

  @Override
  public void beforeCompile(QueryLifeTimeHookContext ctx) {
    // nothing: a query counts while it executes
  }

  @Override
  public void afterCompile(QueryLifeTimeHookContext ctx, boolean hasError) {
    if (hasError) {
      release(ctx);
    }
  }

  @Override
  public void beforeExecution(QueryLifeTimeHookContext ctx) {
    try {
      HiveConf conf = ctx.getHiveConf();
      ArbiterSettings s = Registrations.settings(conf::get);
      if (s == null) {
        return;
      }
      HookContext hc = ctx.getHookContext();
      if (!runsOnCluster(hc) || registeredByClient(conf)) {
        return;
      }
      Registrations.ensure(s, queryId(hc, conf), user(hc));
    } catch (Throwable t) {
      swallow("beforeExecution", t);
    }
  }

  @Override
  public void afterExecution(QueryLifeTimeHookContext ctx, boolean hasError) {
    release(ctx);
  }

  private static void release(QueryLifeTimeHookContext ctx) {
    try {
      if (Registrations.BY_QUERY.isEmpty()) {
        return;
      }
      Registrations.release(queryId(ctx.getHookContext(), ctx.getHiveConf()));
    } catch (Throwable t) {
      swallow("afterExecution", t);
    }
  }

  /**
   * Whether the query runs work on the cluster (a Tez or MapReduce task): only such a query is
   * a job of the arbiter's |J|. DDL, USE, SET and answers from the metastore or a fetch alone
   * take no containers. Unknown (no plan): counted.
   */
  static boolean runsOnCluster(HookContext hc) {
    QueryPlan plan = hc == null ? null : hc.getQueryPlan();
    if (plan == null || plan.getRootTasks() == null) {
      return true;
    }
    return !Utilities.getTezTasks(plan.getRootTasks()).isEmpty()
        || !Utilities.getMRTasks(plan.getRootTasks()).isEmpty();
  }

  /** The tag qoop-hive gives the statements of a query it registered itself (one job). */
  static final String CLIENT_TAG = "yarn-arbiter-query:";

  /**
   * Whether the session says its client registered the query itself: qoop-hive runs a query
   * as several statements (its stages) under {@code hive.query.tag=yarn-arbiter-query:<job>},
   * the tag the arbiter's watcher also knows; each stage must not count as one more job.
   */
  static boolean registeredByClient(org.apache.hadoop.conf.Configuration conf) {
    String tag = conf == null ? null : conf.get("hive.query.tag");
    return tag != null && tag.toLowerCase(java.util.Locale.ROOT).contains(CLIENT_TAG);
  }

  /** Hive's query id: the plan's, else the query state's, else {@code hive.query.id}. */
  static String queryId(HookContext hc, HiveConf conf) {
    if (hc != null) {
      QueryPlan plan = hc.getQueryPlan();
      if (plan != null && plan.getQueryId() != null) {
        return plan.getQueryId();
      }
      if (hc.getQueryState() != null && hc.getQueryState().getQueryId() != null) {
        return hc.getQueryState().getQueryId();
      }
    }
    return conf == null ? null : conf.get("hive.query.id");
  }

  /** The session user (the HS2 login user of the query), or "". */
  static String user(HookContext hc) {
    if (hc == null) {
      return "";
    }
    if (hc.getUserName() != null) {
      return hc.getUserName();
    }
    return hc.getUgi() == null ? "" : hc.getUgi().getShortUserName();
  }

  /** An unexpected error in a hook: logged with its stack once per kind, never thrown to Hive. */
  static void swallow(String where, Throwable t) {
    if (t instanceof VirtualMachineError) {
      throw (VirtualMachineError) t;
    }
    String kind = where + ":" + t.getClass().getName();
    if (LOGGED.size() < 100 && LOGGED.add(kind)) {
      Registrations.LOG.warn("yarn-arbiter: unexpected error in " + where + " (query runs on)", t);
    } else {
      Registrations.LOG.debug("yarn-arbiter: unexpected error in " + where, t);
    }
  }

  private static final java.util.Set<String> LOGGED =
      java.util.Collections.newSetFromMap(new java.util.concurrent.ConcurrentHashMap<String, Boolean>());
}
