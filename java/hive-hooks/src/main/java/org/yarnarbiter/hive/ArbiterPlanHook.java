package org.yarnarbiter.hive;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardOpenOption;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Deque;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;

import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.ql.QueryPlan;
import org.apache.hadoop.hive.ql.exec.CommonJoinOperator;
import org.apache.hadoop.hive.ql.exec.ConditionalTask;
import org.apache.hadoop.hive.ql.exec.FetchTask;
import org.apache.hadoop.hive.ql.exec.Operator;
import org.apache.hadoop.hive.ql.exec.TableScanOperator;
import org.apache.hadoop.hive.ql.exec.Task;
import org.apache.hadoop.hive.ql.exec.tez.TezTask;
import org.apache.hadoop.hive.ql.hooks.ExecuteWithHookContext;
import org.apache.hadoop.hive.ql.hooks.HookContext;
import org.apache.hadoop.hive.ql.plan.BaseWork;
import org.apache.hadoop.hive.ql.plan.TableScanDesc;
import org.apache.hadoop.hive.ql.plan.TezEdgeProperty;
import org.apache.hadoop.hive.ql.plan.TezWork;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.yarnarbiter.hive.ArbiterClient.Registration;

/**
 * An {@link ExecuteWithHookContext} pre-execution hook ({@code hive.exec.pre.hooks}) that
 * appends one JSON line per query to {@code yarn.arbiter.plan.log}: the query, the plan Hive
 * chose (per Tez vertex: the tables it scans in order and its join operators; the DAG's edges)
 * and the arbiter's max-min fair share for the query at that moment (QOOP's per-query resource
 * feedback: fair_share.vcores / memory_mb over active_jobs registered jobs, and the epoch).
 *
 * <p>Hive runs the pre-execution hooks just before the lifetime hooks' {@code beforeExecution},
 * so when {@link ArbiterQueryHook} is configured this hook registers the query itself (the
 * lifetime hook then finds the registration and keeps it; {@code afterExecution} unregisters
 * it, also when a later pre hook fails). Without a registration (no lifetime hook, arbiter
 * down) job_id and share are null. Never fails a query.
 */
public class ArbiterPlanHook implements ExecuteWithHookContext {
  static final Logger LOG = LoggerFactory.getLogger(ArbiterPlanHook.class);
  private static final OutageLog LOG_FILE = new OutageLog(OutageLog.slf4j(LOG));
  private static final Object WRITE_LOCK = new Object();
  static final String LIFETIME_HOOKS = "hive.query.lifetime.hooks";

  @Override
  public void run(HookContext hc) {
    try {
      HiveConf conf = hc.getConf();
      ArbiterSettings s = Registrations.settings(conf::get);
      if (s == null) {
        return;
      }
      String queryId = ArbiterQueryHook.queryId(hc, conf);
      Registration reg = Registrations.get(queryId);
      if (reg == null && lifetimeHookConfigured(conf) && ArbiterQueryHook.runsOnCluster(hc)
          && !ArbiterQueryHook.registeredByClient(conf)) {
        reg = Registrations.ensure(s, queryId, ArbiterQueryHook.user(hc));
      }
      ShareUpdate share = null;
      if (reg != null) {
        try {
          share = ArbiterClient.currentShare(reg);
        } catch (Exception e) {
          if (!Registrations.interruption(e)) {
            Registrations.OUTAGE.failure("SubscribeShare for " + reg.jobId, e);
          }
        }
      }
      if (s.planLog == null) {
        return;
      }
      String line = record(hc, queryId, reg, share);
      try {
        append(s.planLog, line);
        LOG_FILE.success();
      } catch (IOException e) {
        LOG_FILE.failure("appending to " + ArbiterSettings.PLAN_LOG + " " + s.planLog, e);
      }
    } catch (Throwable t) {
      ArbiterQueryHook.swallow("ArbiterPlanHook", t);
    }
  }

  static boolean lifetimeHookConfigured(HiveConf conf) {
    for (String h : conf.getTrimmedStringCollection(LIFETIME_HOOKS)) {
      if (h.equals(ArbiterQueryHook.class.getName())) {
        return true;
      }
    }
    return false;
  }

  /** The JSON line for one query. */
  static String record(HookContext hc, String queryId, Registration reg, ShareUpdate share) {
    QueryPlan plan = hc.getQueryPlan();
    List<String> tables = new ArrayList<>();
    List<String> tasks = new ArrayList<>();
    int joins = 0;
    for (Task<?> t : allTasks(plan)) {
      Json.Obj task = new Json.Obj().put("id", t.getId())
          .put("type", t instanceof TezTask ? "TEZ" : String.valueOf(t.getType()));
      if (t instanceof TezTask) {
        TezWork work = ((TezTask) t).getWork();
        List<String> vertices = new ArrayList<>();
        for (BaseWork w : work.getAllWork()) {
          List<String> vTables = new ArrayList<>();
          List<String> vJoins = new ArrayList<>();
          walk(w.getAllRootOperators(), vTables, vJoins);
          tables.addAll(vTables);
          joins += vJoins.size();
          List<String> edges = new ArrayList<>();
          for (BaseWork child : work.getChildren(w)) {
            TezEdgeProperty e = work.getEdgeProperty(w, child);
            edges.add(new Json.Obj().put("to", child.getName())
                .put("type", e == null ? null : String.valueOf(e.getEdgeType())).toString());
          }
          vertices.add(new Json.Obj()
              .put("name", w.getName())
              .put("kind", w.getClass().getSimpleName())
              .raw("tables", Json.strings(vTables))
              .put("joins", (long) vJoins.size())
              .raw("join_ops", Json.strings(vJoins))
              .raw("edges", Json.array(edges))
              .toString());
        }
        task.raw("vertices", Json.array(vertices));
      }
      tasks.add(task.toString());
    }
    FetchTask fetch = plan == null ? null : plan.getFetchTask();
    if (fetch != null && fetch.getWork() != null && fetch.getWork().getSource() != null) {
      List<String> fTables = new ArrayList<>();
      List<String> fJoins = new ArrayList<>();
      walk(Collections.<Operator<?>>singleton(fetch.getWork().getSource()), fTables, fJoins);
      if (!fTables.isEmpty()) { // a query answered by the fetch task alone (no Tez job)
        tables.addAll(fTables);
        tasks.add(new Json.Obj().put("id", fetch.getId()).put("type", "FETCH")
            .raw("tables", Json.strings(fTables)).toString());
      }
    }
    String query = plan != null ? plan.getQueryString() : null;
    if (query == null && hc.getQueryState() != null) {
      query = hc.getQueryState().getQueryString();
    }
    return new Json.Obj()
        .put("ts_ms", System.currentTimeMillis())
        .put("query_id", queryId)
        .put("user", ArbiterQueryHook.user(hc))
        .put("query", query)
        .put("job_id", reg == null ? null : reg.jobId)
        .raw("share", share == null ? null : share.toJson())
        .raw("tables", Json.strings(tables))
        .put("joins", (long) joins)
        .raw("tasks", Json.array(tasks))
        .toString();
  }

  /** Every task of the plan, root tasks first, each once (children, dependents, conditional branches). */
  static List<Task<?>> allTasks(QueryPlan plan) {
    List<Task<?>> out = new ArrayList<>();
    if (plan == null || plan.getRootTasks() == null) {
      return out;
    }
    Set<Task<?>> seen = Collections.newSetFromMap(new IdentityHashMap<Task<?>, Boolean>());
    Deque<Task<?>> todo = new ArrayDeque<>(plan.getRootTasks());
    while (!todo.isEmpty()) {
      Task<?> t = todo.poll();
      if (!seen.add(t)) {
        continue;
      }
      out.add(t);
      if (t instanceof ConditionalTask && ((ConditionalTask) t).getListTasks() != null) {
        todo.addAll(((ConditionalTask) t).getListTasks());
      }
      if (t.getChildTasks() != null) {
        todo.addAll(t.getChildTasks());
      }
      if (t.getDependentTasks() != null) {
        todo.addAll(t.getDependentTasks());
      }
    }
    return out;
  }

  /** Depth-first over an operator tree: table scans ("db.table") and join operators, in order. */
  static void walk(Iterable<? extends Operator<?>> roots, List<String> tables, List<String> joins) {
    Set<Operator<?>> seen = Collections.newSetFromMap(new IdentityHashMap<Operator<?>, Boolean>());
    Deque<Operator<?>> stack = new ArrayDeque<>();
    List<Operator<?>> rootList = new ArrayList<>();
    for (Operator<?> r : roots) {
      rootList.add(r);
    }
    for (int i = rootList.size() - 1; i >= 0; i--) {
      stack.push(rootList.get(i));
    }
    while (!stack.isEmpty()) {
      Operator<?> op = stack.pop();
      if (op == null || !seen.add(op)) {
        continue;
      }
      if (op instanceof TableScanOperator) {
        TableScanDesc d = ((TableScanOperator) op).getConf();
        if (d != null && d.getTableName() != null) {
          String db = d.getDatabaseName();
          tables.add(db == null ? d.getTableName() : db + "." + d.getTableName());
        }
      } else if (op instanceof CommonJoinOperator) {
        joins.add(String.valueOf(op.getType()));
      }
      List<? extends Operator<?>> children = op.getChildOperators();
      if (children != null) {
        for (int i = children.size() - 1; i >= 0; i--) {
          stack.push(children.get(i));
        }
      }
    }
  }

  static void append(String path, String line) throws IOException {
    File f = new File(path);
    File dir = f.getAbsoluteFile().getParentFile();
    synchronized (WRITE_LOCK) {
      if (dir != null && !dir.isDirectory() && !dir.mkdirs() && !dir.isDirectory()) {
        throw new IOException("cannot create " + dir);
      }
      Files.write(f.toPath(), (line + "\n").getBytes(StandardCharsets.UTF_8),
          StandardOpenOption.CREATE, StandardOpenOption.APPEND, StandardOpenOption.WRITE);
    }
  }
}
