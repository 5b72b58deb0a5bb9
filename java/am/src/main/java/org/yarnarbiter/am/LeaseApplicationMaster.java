package org.yarnarbiter.am;

import java.io.IOException;
import java.net.InetAddress;
import java.net.URI;
import java.nio.ByteBuffer;
import java.text.SimpleDateFormat;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Date;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.io.DataOutputBuffer;
import org.apache.hadoop.security.Credentials;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.security.token.Token;
import org.apache.hadoop.yarn.api.ApplicationConstants;
import org.apache.hadoop.yarn.api.records.Container;
import org.apache.hadoop.yarn.api.records.ContainerId;
import org.apache.hadoop.yarn.api.records.ContainerLaunchContext;
import org.apache.hadoop.yarn.api.records.ContainerStatus;
import org.apache.hadoop.yarn.api.records.FinalApplicationStatus;
import org.apache.hadoop.yarn.api.records.LocalResource;
import org.apache.hadoop.yarn.api.records.LocalResourceType;
import org.apache.hadoop.yarn.api.records.LocalResourceVisibility;
import org.apache.hadoop.yarn.api.records.NodeReport;
import org.apache.hadoop.yarn.api.records.NodeState;
import org.apache.hadoop.yarn.api.records.Priority;
import org.apache.hadoop.yarn.api.records.Resource;
import org.apache.hadoop.yarn.api.records.URL;
import org.apache.hadoop.yarn.api.records.UpdatedContainer;
import org.apache.hadoop.yarn.client.api.AMRMClient.ContainerRequest;
import org.apache.hadoop.yarn.client.api.YarnClient;
import org.apache.hadoop.yarn.client.api.async.AMRMClientAsync;
import org.apache.hadoop.yarn.client.api.async.NMClientAsync;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.security.AMRMTokenIdentifier;

/**
 * The lease ApplicationMaster: turns the GPU leases an arbiter grants into YARN containers.
 *
 * <p>It implements the AM side of the line protocol of {@code yarn_bridge/am_protocol.py}. The
 * AM starts a <em>sidecar</em> ({@code bash -c "$YARN_ARBITER_SIDECAR"}, or the command given
 * as its arguments) which holds the app's arbiter session and decides which containers the app
 * should have; the AM only executes: one tab-separated message a line on the sidecar's stdin and
 * stdout, the sidecar's stderr going to the AM's stderr.
 *
 * <ul>
 *   <li>sidecar to AM: {@code ACQUIRE lease node gpus memory_mb vcores indices command} (one
 *       container with {@code yarn.io/gpu = gpus} on exactly {@code node}: strict locality,
 *       matched to its request by {@code allocationRequestId}), {@code RELEASE lease} (stop and
 *       release the lease's containers, drop its pending requests; a container that arrives
 *       later for it is released at once), {@code FINISH SUCCEEDED|FAILED message} (release
 *       everything, unregister, exit);
 *   <li>AM to sidecar: {@code ALLOCATED lease container node}, {@code STARTED lease container},
 *       {@code COMPLETED lease container exit_status diagnostics}, {@code NODE_LOST node},
 *       {@code SHUTDOWN}.
 * </ul>
 *
 * <p>A container runs {@code bash -c command} with {@code YARN_ARBITER_LEASE_ID}, {@code
 * YARN_ARBITER_GPU_INDICES} and {@code CUDA_VISIBLE_DEVICES} (the indices) plus every {@code
 * YARN_ARBITER_*} variable of the AM except the app token, and the local resources listed in {@code
 * YARN_ARBITER_LOCAL_RESOURCES} (what {@code yarn-arbiter submit --file/--archive} shipped). If
 * the sidecar exits, everything is released and the AM unregisters (FAILED unless it sent
 * FINISH). Every decision is logged on stderr.
 */
public final class LeaseApplicationMaster {
  static final String GPU = "yarn.io/gpu";
  static final String ENV_SIDECAR = "YARN_ARBITER_SIDECAR";
  static final String ENV_LOCAL_RESOURCES = "YARN_ARBITER_LOCAL_RESOURCES";
  static final String ENV_HEARTBEAT_MS = "YARN_ARBITER_AM_HEARTBEAT_MS";
  static final String ENV_PREFIX = "YARN_ARBITER_";
  /** The app's arbiter token: the AM's alone (it acts for the app), never a job container's. */
  static final String ENV_APP_TOKEN = "YARN_ARBITER_APP_TOKEN";
  static final int MAX_DIAGNOSTICS = 400;

  /** An ACQUIRE not yet answered by the RM. */
  static final class Pending {
    final String lease;
    final String node;
    final String indices;
    final String command;
    final ContainerRequest request;

    Pending(String lease, String node, String indices, String command, ContainerRequest request) {
      this.lease = lease;
      this.node = node;
      this.indices = indices;
      this.command = command;
      this.request = request;
    }
  }

  /** A container the AM holds for a lease. */
  static final class Held {
    final String lease;
    final Container container;

    Held(String lease, Container container) {
      this.lease = lease;
      this.container = container;
    }
  }

  private final Configuration conf;
  private final Sidecar sidecar;
  private final CountDownLatch done = new CountDownLatch(1);
  private final Map<Long, Pending> pending = new HashMap<>();
  private final Map<ContainerId, Held> held = new LinkedHashMap<>();
  private final Set<String> released = new HashSet<>();
  private final Map<String, LocalResource> localResources;
  private AMRMClientAsync<ContainerRequest> amrm;
  private NMClientAsync nm;
  private YarnClient yarn; // only to resolve a host name to a node id
  private long nextRequestId = 1;
  private FinalApplicationStatus finalStatus = FinalApplicationStatus.FAILED;
  private String finalMessage = "";
  private boolean finishing;
  private boolean shutdownRequested;

  LeaseApplicationMaster(Configuration conf, String sidecarCommand) {
    this.conf = conf;
    this.sidecar = new Sidecar(sidecarCommand, this::onSidecarLine, this::onSidecarExit);
    this.localResources = parseLocalResources(System.getenv(ENV_LOCAL_RESOURCES));
  }

  public static void main(String[] args) throws Exception {
    String command = args.length > 0 ? String.join(" ", args) : System.getenv(ENV_SIDECAR);
    if (command == null || command.trim().isEmpty()) {
      log("no sidecar command: give it as arguments or in $" + ENV_SIDECAR);
      System.exit(2);
    }
    LeaseApplicationMaster am = new LeaseApplicationMaster(new YarnConfiguration(), command);
    System.exit(am.run() ? 0 : 1);
  }

  static void log(String message) {
    String now = new SimpleDateFormat("yyyy-MM-dd HH:mm:ss,SSS").format(new Date());
    System.err.println(now + " lease-am: " + message);
    System.err.flush();
  }

  // ------------------------------------------------------------------------------ lifecycle

  boolean run() throws Exception {
    int heartbeatMs = Integer.parseInt(envOr(ENV_HEARTBEAT_MS, "250"));
    amrm = AMRMClientAsync.createAMRMClientAsync(heartbeatMs, new RMCallbacks());
    amrm.init(conf);
    amrm.start();
    nm = NMClientAsync.createNMClientAsync(new NMCallbacks());
    nm.init(conf);
    nm.start();
    String host = InetAddress.getLocalHost().getHostName();
    amrm.registerApplicationMaster(host, -1, "");
    log("registered with the RM (heartbeat " + heartbeatMs + " ms); " + localResources.size()
        + " local resource(s) for containers; starting the sidecar");
    sidecar.start();
    done.await();
    return shutDown();
  }

  /** Ends the run once: every container stopped, unregistered (unless the RM said stop). */
  private boolean shutDown() {
    FinalApplicationStatus status;
    String message;
    boolean unregister;
    synchronized (this) {
      status = finalStatus;
      message = finalMessage;
      unregister = !shutdownRequested;
      for (Pending p : pending.values()) {
        amrm.removeContainerRequest(p.request);
      }
      pending.clear();
      for (Held h : held.values()) {
        amrm.releaseAssignedContainer(h.container.getId());
      }
    }
    nm.stop(); // stops every container it started (cleanup on stop), synchronously
    if (unregister) {
      try {
        amrm.unregisterApplicationMaster(status, message, null);
        log("unregistered: " + status + " (" + message + ")");
      } catch (Exception e) {
        log("unregister failed: " + e);
        status = FinalApplicationStatus.FAILED;
      }
    } else {
      log("the RM asked the AM to shut down: exiting without unregistering");
    }
    amrm.stop();
    if (yarn != null) {
      yarn.stop();
    }
    sidecar.stop();
    return unregister && status == FinalApplicationStatus.SUCCEEDED;
  }

  private synchronized void finish(FinalApplicationStatus status, String message) {
    if (finishing) {
      return;
    }
    finishing = true;
    finalStatus = status;
    finalMessage = message;
    log("finishing: " + status + " (" + message + ")");
    done.countDown();
  }

  // ------------------------------------------------------------------------ the sidecar side

  private void onSidecarLine(String line) {
    String[] f = line.split("\t", 8);
    try {
      switch (f[0]) {
        case "ACQUIRE":
          need(f, 8, line);
          acquire(f[1], f[2], Integer.parseInt(f[3]), Long.parseLong(f[4]),
              Integer.parseInt(f[5]), f[6], f[7]);
          break;
        case "RELEASE":
          need(f, 2, line);
          release(f[1]);
          break;
        case "FINISH":
          need(f, 2, line);
          FinalApplicationStatus s = FinalApplicationStatus.valueOf(f[1]);
          if (s != FinalApplicationStatus.SUCCEEDED && s != FinalApplicationStatus.FAILED) {
            throw new IllegalArgumentException("FINISH takes SUCCEEDED or FAILED, not " + s);
          }
          finish(s, f.length > 2 ? f[2] : "");
          break;
        default:
          throw new IllegalArgumentException("unknown message " + f[0]);
      }
    } catch (IllegalArgumentException e) { // NumberFormatException included
      log("ignoring a malformed sidecar line (" + e.getMessage() + "): " + line);
    }
  }

  private void onSidecarExit(int exitCode) {
    synchronized (this) {
      if (finishing) {
        return;
      }
    }
    finish(FinalApplicationStatus.FAILED, "the sidecar exited with " + exitCode
        + " without FINISH");
  }

  private static void need(String[] f, int n, String line) {
    if (f.length < n) {
      throw new IllegalArgumentException(f[0] + " needs " + n + " fields, got " + f.length);
    }
  }

  private synchronized void acquire(String lease, String node, int gpus, long memoryMb,
      int vcores, String indices, String command) {
    if (finishing) {
      log("ACQUIRE " + lease + " ignored: finishing");
      return;
    }
    released.remove(lease); // a lease id may be acquired again after a release
    Resource capability = Resource.newInstance(memoryMb, vcores);
    capability.setResourceValue(GPU, gpus);
    long id = nextRequestId++;
    String resourceName = resourceName(node);
    ContainerRequest request = ContainerRequest.newBuilder()
        .allocationRequestId(id)
        .capability(capability)
        .nodes(new String[] {resourceName})
        .relaxLocality(false)
        .priority(Priority.newInstance(1))
        .build();
    pending.put(id, new Pending(lease, node, indices, command, request));
    amrm.addContainerRequest(request);
    log("ACQUIRE " + lease + ": request " + id + " for " + capability + " on " + resourceName
        + " only (GPUs " + indices + ")");
  }

  private synchronized void release(String lease) {
    released.add(lease);
    for (Iterator<Pending> it = pending.values().iterator(); it.hasNext(); ) {
      Pending p = it.next();
      if (p.lease.equals(lease)) {
        amrm.removeContainerRequest(p.request);
        it.remove();
        log("RELEASE " + lease + ": pending request " + p.request.getAllocationRequestId()
            + " withdrawn");
      }
    }
    for (Held h : held.values()) {
      if (h.lease.equals(lease)) {
        stopAndRelease(h, "RELEASE " + lease);
      }
    }
  }

  private void stopAndRelease(Held h, String why) {
    Container c = h.container;
    // Stopping on the NM ends the process now; releasing on the RM frees its resources in the
    // scheduler at once (rather than at the NM's next heartbeat).
    nm.stopContainerAsync(c.getId(), c.getNodeId());
    amrm.releaseAssignedContainer(c.getId());
    log(why + ": container " + c.getId() + " on " + c.getNodeId() + " stopped and released");
  }

  /** The scheduler's name of a node: host:port with include-port-in-node-name, else host. */
  private String resourceName(String node) {
    boolean withPort = conf.getBoolean("yarn.scheduler.include-port-in-node-name", false);
    int colon = node.lastIndexOf(':');
    if (!withPort) {
      return colon >= 0 ? node.substring(0, colon) : node;
    }
    if (colon >= 0) {
      return node;
    }
    try { // a bare host name: the one RUNNING node on it
      if (yarn == null) {
        yarn = YarnClient.createYarnClient();
        yarn.init(conf);
        yarn.start();
      }
      for (NodeReport r : yarn.getNodeReports(NodeState.RUNNING)) {
        if (r.getNodeId().getHost().equals(node)) {
          return r.getNodeId().toString();
        }
      }
    } catch (Exception e) {
      log("cannot resolve node " + node + ": " + e);
    }
    return node;
  }

  // ---------------------------------------------------------------------------- the RM side

  private synchronized void allocated(List<Container> containers) {
    for (Container c : containers) {
      Pending p = pending.remove(c.getAllocationRequestId());
      if (p == null || finishing) {
        amrm.releaseAssignedContainer(c.getId());
        log("container " + c.getId() + " (request " + c.getAllocationRequestId()
            + ") matches no pending ACQUIRE: released");
        continue;
      }
      amrm.removeContainerRequest(p.request);
      if (released.contains(p.lease)) {
        amrm.releaseAssignedContainer(c.getId());
        log("container " + c.getId() + " arrived for released lease " + p.lease + ": released");
        continue;
      }
      held.put(c.getId(), new Held(p.lease, c));
      sidecar.send("ALLOCATED", p.lease, c.getId().toString(), c.getNodeId().toString());
      log("ALLOCATED " + p.lease + ": " + c.getId() + " on " + c.getNodeId() + " with "
          + c.getResource() + "; launching");
      nm.startContainerAsync(c, launchContext(p));
    }
  }

  private ContainerLaunchContext launchContext(Pending p) {
    Map<String, String> env = new HashMap<>();
    for (Map.Entry<String, String> e : System.getenv().entrySet()) {
      if (e.getKey().startsWith(ENV_PREFIX) && !e.getKey().equals(ENV_SIDECAR)
          && !e.getKey().equals(ENV_LOCAL_RESOURCES) && !e.getKey().equals(ENV_APP_TOKEN)) {
        env.put(e.getKey(), e.getValue());
      }
    }
    env.put("YARN_ARBITER_LEASE_ID", p.lease);
    env.put("YARN_ARBITER_GPU_INDICES", p.indices);
    env.put("CUDA_VISIBLE_DEVICES", p.indices);
    List<String> command = new ArrayList<>();
    command.add("bash");
    command.add("-c");
    command.add(escapeForLaunchScript(shellQuote(p.command)));
    command.add("1>" + ApplicationConstants.LOG_DIR_EXPANSION_VAR + "/stdout");
    command.add("2>" + ApplicationConstants.LOG_DIR_EXPANSION_VAR + "/stderr");
    return ContainerLaunchContext.newInstance(
        localResources, env, command, null, containerTokens(), null);
  }

  private synchronized void completed(List<ContainerStatus> statuses) {
    for (ContainerStatus s : statuses) {
      Held h = held.remove(s.getContainerId());
      if (h == null) {
        continue; // released before it was ours, or the AM's own
      }
      String diagnostics = clean(s.getDiagnostics());
      sidecar.send("COMPLETED", h.lease, s.getContainerId().toString(),
          Integer.toString(s.getExitStatus()), diagnostics);
      log("COMPLETED " + h.lease + ": " + s.getContainerId() + " exit " + s.getExitStatus()
          + (diagnostics.isEmpty() ? "" : " (" + diagnostics + ")"));
    }
  }

  private synchronized void nodesUpdated(List<NodeReport> reports) {
    for (NodeReport r : reports) {
      if (r.getNodeState().isUnusable()) {
        sidecar.send("NODE_LOST", r.getNodeId().toString());
        log("NODE_LOST " + r.getNodeId() + " (" + r.getNodeState() + ")");
      }
    }
  }

  private synchronized void started(ContainerId id) {
    Held h = held.get(id);
    if (h == null) {
      return;
    }
    if (released.contains(h.lease)) { // released while it was starting
      stopAndRelease(h, "late start of released lease " + h.lease);
      return;
    }
    sidecar.send("STARTED", h.lease, id.toString());
    log("STARTED " + h.lease + ": " + id);
  }

  private synchronized void startFailed(ContainerId id, Throwable t) {
    Held h = held.remove(id);
    amrm.releaseAssignedContainer(id);
    if (h != null) {
      sidecar.send("COMPLETED", h.lease, id.toString(), "-1", clean("start failed: " + t));
    }
    log("container " + id + " failed to start: " + t);
  }

  private final class RMCallbacks extends AMRMClientAsync.AbstractCallbackHandler {
    @Override
    public void onContainersAllocated(List<Container> containers) {
      allocated(containers);
    }

    @Override
    public void onContainersCompleted(List<ContainerStatus> statuses) {
      completed(statuses);
    }

    @Override
    public void onContainersUpdated(List<UpdatedContainer> containers) {}

    @Override
    public void onNodesUpdated(List<NodeReport> reports) {
      nodesUpdated(reports);
    }

    @Override
    public void onShutdownRequest() {
      synchronized (LeaseApplicationMaster.this) {
        shutdownRequested = true;
      }
      sidecar.send("SHUTDOWN");
      finish(FinalApplicationStatus.FAILED, "the RM asked the AM to shut down");
    }

    @Override
    public float getProgress() {
      return 0f;
    }

    @Override
    public void onError(Throwable t) {
      log("AMRM client error: " + t);
      finish(FinalApplicationStatus.FAILED, "AMRM client error: " + clean(t.toString()));
    }
  }

  private final class NMCallbacks extends NMClientAsync.AbstractCallbackHandler {
    @Override
    public void onContainerStarted(ContainerId id, Map<String, ByteBuffer> serviceResponse) {
      started(id);
    }

    @Override
    public void onStartContainerError(ContainerId id, Throwable t) {
      startFailed(id, t);
    }

    @Override
    public void onContainerStatusReceived(ContainerId id, ContainerStatus status) {}

    @Override
    public void onContainerStopped(ContainerId id) {}

    @Override
    public void onGetContainerStatusError(ContainerId id, Throwable t) {}

    @Override
    @SuppressWarnings("deprecation")
    public void onContainerResourceIncreased(ContainerId id, Resource resource) {}

    @Override
    public void onContainerResourceUpdated(ContainerId id, Resource resource) {}

    @Override
    @SuppressWarnings("deprecation")
    public void onIncreaseContainerResourceError(ContainerId id, Throwable t) {}

    @Override
    public void onUpdateContainerResourceError(ContainerId id, Throwable t) {}

    @Override
    public void onStopContainerError(ContainerId id, Throwable t) {
      log("stopping " + id + " failed (it may have ended already): " + t);
    }
  }

  // ---------------------------------------------------------------------------------- helpers

  static String envOr(String name, String fallback) {
    String v = System.getenv(name);
    return v == null || v.isEmpty() ? fallback : v;
  }

  /** One protocol field: no tabs or line breaks, bounded. */
  static String clean(String text) {
    String t = text == null ? "" : text.replaceAll("[\\t\\r\\n]+", " ").trim();
    return t.length() > MAX_DIAGNOSTICS ? t.substring(0, MAX_DIAGNOSTICS) : t;
  }

  static String shellQuote(String s) {
    return "'" + s.replace("'", "'\\''") + "'";
  }

  /**
   * The NodeManager writes a container's commands, joined by spaces, into its launch script as
   * {@code exec /bin/bash -c "..."} without escaping (Hadoop 2.x to 3.5), so whatever is special
   * inside double quotes is escaped here to reach the inner {@code bash -c} unchanged.
   */
  static String escapeForLaunchScript(String s) {
    return s.replaceAll("([\\\\\"$`])", "\\\\$1");
  }

  /**
   * {@code name=TYPE:size:timestamp:url} entries separated by commas (what submit writes), as
   * container local resources; malformed entries are logged and skipped.
   */
  static Map<String, LocalResource> parseLocalResources(String spec) {
    Map<String, LocalResource> out = new HashMap<>();
    if (spec == null || spec.trim().isEmpty()) {
      return out;
    }
    for (String entry : spec.split(",")) {
      try {
        int eq = entry.indexOf('=');
        String[] f = entry.substring(eq + 1).split(":", 4);
        if (eq <= 0 || f.length != 4) {
          throw new IllegalArgumentException("not name=TYPE:size:timestamp:url");
        }
        out.put(entry.substring(0, eq), LocalResource.newInstance(
            URL.fromURI(new URI(f[3])), LocalResourceType.valueOf(f[0]),
            LocalResourceVisibility.APPLICATION, Long.parseLong(f[1]), Long.parseLong(f[2])));
      } catch (Exception e) {
        log("skipping local resource " + entry + ": " + e.getMessage());
      }
    }
    return Collections.unmodifiableMap(out);
  }

  /** The AM's tokens minus the AMRM token (which containers must not have). */
  private static ByteBuffer containerTokens() {
    try {
      Credentials credentials = new Credentials();
      for (Token<?> t : UserGroupInformation.getCurrentUser().getCredentials().getAllTokens()) {
        if (!t.getKind().equals(AMRMTokenIdentifier.KIND_NAME)) {
          credentials.addToken(t.getService(), t);
        }
      }
      DataOutputBuffer out = new DataOutputBuffer();
      credentials.writeTokenStorageToStream(out);
      return ByteBuffer.wrap(out.getData(), 0, out.getLength());
    } catch (IOException e) {
      log("no tokens for containers: " + e);
      return null;
    }
  }
}
