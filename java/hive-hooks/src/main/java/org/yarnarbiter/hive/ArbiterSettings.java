package org.yarnarbiter.hive;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.function.Function;

/**
 * The settings of the hooks that register Hive queries with the arbiter (QOOP's per-query
 * resource feedback: the arbiter's max-min share over the registered queries), read from the
 * query's HiveConf: hive-site.xml, or {@code set} in a session unless the keys are in
 * {@code hive.conf.restricted.list} (recommended: add {@code yarn.arbiter.} to it, and the
 * token to {@code hive.conf.hidden.list}).
 *
 * <ul>
 *   <li>{@code yarn.arbiter.address} host:port of the arbiter (required; unset: the hooks do nothing),
 *       or a comma-separated list {@code a1:50051,a2:50051} for an active/standby pair: a
 *       registration goes to the address that last answered and fails over to the next when one
 *       is unreachable or answers UNAVAILABLE (a standby does)
 *   <li>{@code yarn.arbiter.service.token} / {@code yarn.arbiter.service.token.file}: the query-service
 *       credential, sent on RegisterQuery as {@code x-service-token} (not sent if neither is set)
 *   <li>{@code yarn.arbiter.timeout.ms} (2000): the deadline of every call
 *   <li>{@code yarn.arbiter.queue} ("analytics")
 *   <li>{@code yarn.arbiter.plan.log} (default {@code ${hive.querylog.location}/arbiter-plans.jsonl})
 *   <li>{@code yarn.arbiter.tls} (false), {@code yarn.arbiter.tls.ca} (PEM file trusted in
 *       addition to the JVM's default trust store)
 * </ul>
 */
public final class ArbiterSettings {
  public static final String ADDRESS = "yarn.arbiter.address";
  public static final String SERVICE_TOKEN = "yarn.arbiter.service.token";
  public static final String SERVICE_TOKEN_FILE = "yarn.arbiter.service.token.file";
  public static final String TIMEOUT_MS = "yarn.arbiter.timeout.ms";
  public static final String QUEUE = "yarn.arbiter.queue";
  public static final String PLAN_LOG = "yarn.arbiter.plan.log";
  public static final String TLS = "yarn.arbiter.tls";
  public static final String TLS_CA = "yarn.arbiter.tls.ca";
  static final String QUERYLOG_LOCATION = "hive.querylog.location";

  /** This settings' one arbiter address (the first of {@link #addresses} from {@link #from}). */
  public final String address;
  /** Every address configured, in order (one unless an active/standby pair is named). */
  public final List<String> addresses;
  public final String host;
  public final int port;
  public final long timeoutMs;
  public final String queue;
  public final boolean tls;
  /** PEM file of extra trusted CAs, or null. */
  public final String tlsCa;
  /** Path of the plan log, or null (not logged). */
  public final String planLog;
  private final String token;
  private final String tokenFile;

  private ArbiterSettings(Function<String, String> conf, List<String> addresses, int index) {
    String address = addresses.get(index);
    this.address = address;
    this.addresses = addresses;
    int colon = address.lastIndexOf(':');
    if (colon <= 0 || colon == address.length() - 1) {
      throw new IllegalArgumentException(ADDRESS + " must be host:port, got '" + address + "'");
    }
    String h = address.substring(0, colon);
    if (h.startsWith("[") && h.endsWith("]")) {
      h = h.substring(1, h.length() - 1);
    }
    this.host = h;
    try {
      this.port = Integer.parseInt(address.substring(colon + 1));
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(ADDRESS + " must be host:port, got '" + address + "'");
    }
    this.timeoutMs = Math.max(1, parseLong(conf, TIMEOUT_MS, 2000));
    this.queue = orDefault(conf.apply(QUEUE), "analytics");
    this.tls = Boolean.parseBoolean(orDefault(conf.apply(TLS), "false"));
    this.tlsCa = blankToNull(conf.apply(TLS_CA));
    this.token = blankToNull(conf.apply(SERVICE_TOKEN));
    this.tokenFile = blankToNull(conf.apply(SERVICE_TOKEN_FILE));
    String plan = blankToNull(conf.apply(PLAN_LOG));
    if (plan == null) {
      String dir = blankToNull(conf.apply(QUERYLOG_LOCATION));
      plan = dir == null ? null : new File(dir, "arbiter-plans.jsonl").getPath();
    }
    this.planLog = plan;
  }

  /**
   * The settings in {@code conf} (e.g. {@code hiveConf::get}), or null when
   * {@code yarn.arbiter.address} is unset. A malformed address throws IllegalArgumentException.
   */
  public static ArbiterSettings from(Function<String, String> conf) {
    String value = blankToNull(conf.apply(ADDRESS));
    if (value == null) {
      return null;
    }
    List<String> all = new ArrayList<>();
    for (String a : value.split(",")) {
      String t = blankToNull(a);
      if (t == null) {
        throw new IllegalArgumentException(
            ADDRESS + " must be host:port[,host:port...], got '" + value + "'");
      }
      if (!all.contains(t)) {
        all.add(t);
      }
    }
    List<String> addresses = Collections.unmodifiableList(all);
    ArbiterSettings first = new ArbiterSettings(conf, addresses, 0);
    List<ArbiterSettings> each = new ArrayList<>();
    each.add(first);
    for (int i = 1; i < addresses.size(); i++) {
      each.add(new ArbiterSettings(conf, addresses, i)); // a malformed address throws here
    }
    for (ArbiterSettings s : each) {
      s.candidates = Collections.unmodifiableList(each);
    }
    return first;
  }

  private List<ArbiterSettings> candidates;

  /**
   * The settings of every configured address (this one's among them), each for one arbiter:
   * what a registration tries, in turn, when the arbiters are an active/standby pair.
   */
  public List<ArbiterSettings> candidates() {
    return candidates;
  }

  /**
   * The query-service credential: {@code yarn.arbiter.service.token}, else the trimmed content
   * of {@code yarn.arbiter.service.token.file}, else null (RegisterQuery is sent without it).
   * An unreadable token file throws, so nothing is registered without the credential.
   */
  public String serviceToken() throws IOException {
    if (token != null) {
      return token;
    }
    return tokenFile == null ? null : TokenFiles.read(tokenFile);
  }

  /** What identifies the channel: another value means another channel. */
  String channelKey() {
    return address + "|tls=" + tls + "|ca=" + tlsCa;
  }

  private static long parseLong(Function<String, String> conf, String key, long dflt) {
    String v = blankToNull(conf.apply(key));
    if (v == null) {
      return dflt;
    }
    try {
      return Long.parseLong(v);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(key + " must be a number of milliseconds, got '" + v + "'");
    }
  }

  private static String orDefault(String v, String dflt) {
    String s = blankToNull(v);
    return s == null ? dflt : s;
  }

  static String blankToNull(String v) {
    if (v == null) {
      return null;
    }
    String t = v.trim();
    return t.isEmpty() ? null : t;
  }

  /** Token files are read again only when their modification time or size changes. */
  static final class TokenFiles {
    private static volatile Object[] cached; // {path, mtime, size, value}

    static String read(String path) throws IOException {
      File f = new File(path);
      long mtime = f.lastModified();
      long size = f.length();
      Object[] c = cached;
      if (c != null && c[0].equals(path) && (Long) c[1] == mtime && (Long) c[2] == size && mtime != 0) {
        return (String) c[3];
      }
      String value = new String(Files.readAllBytes(f.toPath()), StandardCharsets.UTF_8).trim();
      if (value.isEmpty()) {
        throw new IOException(SERVICE_TOKEN_FILE + " " + path + " is empty");
      }
      cached = new Object[] {path, mtime, size, value};
      return value;
    }
  }
}
