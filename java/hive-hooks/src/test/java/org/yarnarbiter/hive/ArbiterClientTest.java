package org.yarnarbiter.hive;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.ServerSocket;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

import io.grpc.Contexts;
import io.grpc.InsecureServerCredentials;
import io.grpc.Metadata;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.okhttp.OkHttpServerBuilder;
import io.grpc.stub.ServerCalls;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.yarnarbiter.hive.ArbiterClient.Registration;

/**
 * The client and the registration bookkeeping against a fake QueryShare server speaking the
 * same byte[] methods: metadata, the share stream, deadlines, outages and the retry of failed
 * unregistrations.
 */
class ArbiterClientTest {

  /** A QueryShare server that keeps its registered jobs like the arbiter's core.queries. */
  static final class FakeArbiter {
    final Map<String, String> jobs = new ConcurrentHashMap<>(); // job id -> token
    final List<String> serviceTokens = new CopyOnWriteArrayList<>();
    final AtomicInteger ids = new AtomicInteger();
    volatile String requiredServiceToken;
    volatile long registerDelayMs;
    volatile long unregisterDelayMs;
    /** A standby of an active/standby pair: every call is refused with UNAVAILABLE. */
    volatile boolean standby;
    final AtomicInteger registerCalls = new AtomicInteger();
    final Server server;

    FakeArbiter(int port) throws IOException {
      final io.grpc.Context.Key<Metadata> headers = io.grpc.Context.key("headers");
      ServerServiceDefinition def = ServerServiceDefinition.builder(ArbiterClient.SERVICE)
          .addMethod(ArbiterClient.REGISTER_QUERY, ServerCalls.asyncUnaryCall((req, out) -> {
            registerCalls.incrementAndGet();
            if (standby) {
              out.onError(Status.UNAVAILABLE.withDescription("standby; the active is elsewhere").asRuntimeException());
              return;
            }
            String token = headers.get().get(ArbiterClient.SERVICE_TOKEN);
            serviceTokens.add(String.valueOf(token));
            if (requiredServiceToken != null && !requiredServiceToken.equals(token)) {
              out.onError(Status.UNAUTHENTICATED.withDescription("wrong query-service token").asRuntimeException());
              return;
            }
            sleep(registerDelayMs);
            String id = "query-" + ids.incrementAndGet();
            jobs.put(id, "tok-" + id);
            out.onNext(Proto.registerQueryResponse(id, "tok-" + id));
            out.onCompleted();
          }))
          .addMethod(ArbiterClient.SUBSCRIBE_SHARE, ServerCalls.asyncServerStreamingCall((req, out) -> {
            String id = Proto.decodeJobIdRequest(req);
            if (!authorized(headers.get(), id, out)) {
              return;
            }
            ShareUpdate u = new ShareUpdate();
            u.jobId = id;
            u.epoch = 7;
            u.hasFairShare = true;
            u.vcores = 48.0 / jobs.size();
            u.memoryMb = 196608.0 / jobs.size();
            u.activeJobs = jobs.size();
            u.cause = 1;
            out.onNext(Proto.shareUpdate(u)); // and the stream stays open, like the arbiter's
          }))
          .addMethod(ArbiterClient.UNREGISTER_QUERY, ServerCalls.asyncUnaryCall((req, out) -> {
            String id = Proto.decodeJobIdRequest(req);
            if (!authorized(headers.get(), id, out)) {
              return;
            }
            sleep(unregisterDelayMs);
            jobs.remove(id);
            out.onNext(new byte[0]);
            out.onCompleted();
          }))
          .build();
      ServerInterceptor capture = new ServerInterceptor() {
        @Override
        public <Q, R> ServerCall.Listener<Q> interceptCall(
            ServerCall<Q, R> call, Metadata md, ServerCallHandler<Q, R> next) {
          return Contexts.interceptCall(io.grpc.Context.current().withValue(headers, md), call, md, next);
        }
      };
      server = OkHttpServerBuilder.forPort(port, InsecureServerCredentials.create())
          .addService(ServerInterceptors.intercept(def, capture))
          .build()
          .start();
    }

    boolean authorized(Metadata md, String id, io.grpc.stub.StreamObserver<byte[]> out) {
      String token = jobs.get(id);
      if (token == null) {
        out.onError(Status.NOT_FOUND.withDescription("unknown query job " + id).asRuntimeException());
        return false;
      }
      if (!token.equals(md.get(ArbiterClient.APP_TOKEN))) {
        out.onError(Status.PERMISSION_DENIED.asRuntimeException());
        return false;
      }
      return true;
    }

    int port() {
      return server.getPort();
    }

    void stop() throws InterruptedException {
      server.shutdownNow();
      server.awaitTermination();
    }
  }

  static void sleep(long ms) {
    if (ms > 0) {
      try {
        Thread.sleep(ms);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }

  static ArbiterSettings settings(int port, String... kv) {
    return settingsAt("127.0.0.1:" + port, kv);
  }

  static ArbiterSettings settingsAt(String address, String... kv) {
    Map<String, String> m = new HashMap<>();
    m.put(ArbiterSettings.ADDRESS, address);
    m.put(ArbiterSettings.TIMEOUT_MS, "1000");
    for (int i = 0; i < kv.length; i += 2) {
      m.put(kv[i], kv[i + 1]);
    }
    return ArbiterSettings.from(m::get);
  }

  /** The fake server logs the hooks' TCP probes (connections without an HTTP/2 preface). */
  static final java.util.logging.Logger SERVER_LOG =
      java.util.logging.Logger.getLogger("io.grpc.okhttp.OkHttpServerTransport");

  FakeArbiter arbiter;

  @BeforeEach
  void start() throws IOException {
    SERVER_LOG.setLevel(java.util.logging.Level.OFF);
    Registrations.clear();
    arbiter = new FakeArbiter(0);
  }

  @AfterEach
  void stop() throws InterruptedException {
    if (arbiter != null) {
      arbiter.stop();
    }
    ArbiterClient.reset();
    Registrations.clear();
  }

  @Test
  void registersReadsTheShareAndUnregisters() throws IOException {
    ArbiterSettings s = settings(arbiter.port(), ArbiterSettings.SERVICE_TOKEN, "svc-secret");
    Registration a = Registrations.ensure(s, "hive_q1", "alice");
    Registration b = Registrations.ensure(s, "hive_q2", "bob");
    assertNotNull(a);
    assertSame(a, Registrations.ensure(s, "hive_q1", "alice")); // the lifetime hook after the plan hook
    assertEquals(2, arbiter.jobs.size());
    assertEquals("svc-secret", arbiter.serviceTokens.get(0));

    ShareUpdate share = ArbiterClient.currentShare(a);
    assertEquals(a.jobId, share.jobId);
    assertEquals(24.0, share.vcores);
    assertEquals(2, share.activeJobs);

    Registrations.release("hive_q1");
    Registrations.release("hive_q1"); // afterCompile + afterExecution: only one call
    assertEquals(1, arbiter.jobs.size());
    Registrations.release("hive_q2");
    assertTrue(arbiter.jobs.isEmpty());
    assertTrue(Registrations.BY_QUERY.isEmpty());
    assertNotNull(b);
  }

  @Test
  void noServiceTokenHeaderWhenNoneIsConfigured() throws IOException {
    Registrations.ensure(settings(arbiter.port()), "q", "u");
    assertEquals("null", arbiter.serviceTokens.get(0));
  }

  @Test
  void tokenFileIsTrimmed(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir) throws IOException {
    java.nio.file.Path f = dir.resolve("token");
    java.nio.file.Files.write(f, "  from-file\n".getBytes("UTF-8"));
    arbiter.requiredServiceToken = "from-file";
    ArbiterSettings s = settings(arbiter.port(), ArbiterSettings.SERVICE_TOKEN_FILE, f.toString());
    assertNotNull(Registrations.ensure(s, "q", "u"));
  }

  @Test
  void refusedCredentialRegistersNothingAndDoesNotRetryForTheSameQuery() throws IOException {
    arbiter.requiredServiceToken = "right";
    ArbiterSettings s = settings(arbiter.port(), ArbiterSettings.SERVICE_TOKEN, "wrong");
    assertNull(Registrations.ensure(s, "q", "u"));
    assertNull(Registrations.ensure(s, "q", "u")); // plan hook then lifetime hook: one attempt
    assertEquals(1, arbiter.serviceTokens.size());
    assertTrue(Registrations.OUTAGE.isDown());
    Registrations.release("q");
    assertTrue(Registrations.BY_QUERY.isEmpty());
  }

  @Test
  void arbiterDownQueriesRunAndItRecovers() throws Exception {
    int port = arbiter.port();
    arbiter.stop();
    arbiter = null;
    ArbiterSettings s = settings(port);
    assertNull(Registrations.ensure(s, "down0", "u"));
    Registrations.release("down0");
    assertTrue(Registrations.OUTAGE.isDown());
    long t0 = System.nanoTime();
    for (int i = 1; i <= 20; i++) {
      assertNull(Registrations.ensure(s, "down" + i, "u"));
      Registrations.release("down" + i);
    }
    long perQueryMs = (System.nanoTime() - t0) / 1_000_000 / 20;
    assertTrue(perQueryMs < 50, "a query costs " + perQueryMs + " ms while the arbiter is down");

    arbiter = new FakeArbiter(port);
    assertNotNull(Registrations.ensure(s, "up", "u")); // the first query after the outage counts
    assertTrue(!Registrations.OUTAGE.isDown());
  }

  @Test
  void slowArbiterHitsTheDeadline() {
    arbiter.registerDelayMs = 3000;
    ArbiterSettings s = settings(arbiter.port(), ArbiterSettings.TIMEOUT_MS, "200");
    long t0 = System.nanoTime();
    assertNull(Registrations.ensure(s, "slow", "u"));
    long ms = (System.nanoTime() - t0) / 1_000_000;
    assertTrue(ms < 1500, "took " + ms + " ms");
  }

  @Test
  void failedUnregistrationIsRetriedAfterTheNextSuccess() throws Exception {
    int port = arbiter.port();
    ArbiterSettings s = settings(port);
    Registration r = Registrations.ensure(s, "q1", "u");
    assertNotNull(r);
    Map<String, String> kept = new HashMap<>(arbiter.jobs);
    arbiter.stop(); // a network outage while q1 finishes
    arbiter = null;
    Registrations.release("q1");
    assertEquals(1, Registrations.PENDING_UNREGISTER.size());

    arbiter = new FakeArbiter(port);
    arbiter.jobs.putAll(kept); // the arbiter still counts q1
    arbiter.ids.set(100);
    assertNotNull(Registrations.ensure(s, "q2", "u"));
    for (int i = 0; i < 100 && arbiter.jobs.containsKey(r.jobId); i++) {
      Thread.sleep(20);
    }
    assertTrue(!arbiter.jobs.containsKey(r.jobId), "q1 unregistered by the retry");
    assertEquals(1, arbiter.jobs.size());
  }

  @Test
  void unregistersFromAnInterruptedThread() {
    ArbiterSettings s = settings(arbiter.port());
    assertNotNull(Registrations.ensure(s, "q", "u"));
    Thread.currentThread().interrupt();
    try {
      Registrations.release("q");
      assertTrue(Thread.currentThread().isInterrupted(), "interrupt restored");
    } finally {
      Thread.interrupted();
    }
    assertTrue(arbiter.jobs.isEmpty());
  }

  @Test
  void anInterruptDuringUnregisterDoesNotAbandonIt() throws Exception {
    // HiveServer2 interrupts the query's thread when the client closes the operation
    ArbiterSettings s = settings(arbiter.port());
    assertNotNull(Registrations.ensure(s, "q", "u"));
    arbiter.unregisterDelayMs = 400;
    final boolean[] stillInterrupted = new boolean[1];
    Thread hive = new Thread(() -> {
      Registrations.release("q");
      stillInterrupted[0] = Thread.currentThread().isInterrupted();
    });
    hive.start();
    Thread.sleep(100);
    hive.interrupt();
    hive.join(5000);
    assertTrue(stillInterrupted[0], "the interrupt is restored for Hive");
    assertTrue(arbiter.jobs.isEmpty(), "unregistered despite the interrupt");
    assertTrue(Registrations.PENDING_UNREGISTER.isEmpty());
    assertTrue(!Registrations.OUTAGE.isDown());
  }

  @Test
  void failedUnregistrationIsRetriedInTheBackground() throws Exception {
    Registrations.retryDelayMs = 100;
    try {
      int port = arbiter.port();
      ArbiterSettings s = settings(port);
      Registration r = Registrations.ensure(s, "q1", "u");
      Map<String, String> kept = new HashMap<>(arbiter.jobs);
      arbiter.stop();
      arbiter = null;
      Registrations.release("q1"); // fails: arbiter unreachable
      Thread.sleep(300); // a retry or two fail as well
      arbiter = new FakeArbiter(port);
      arbiter.jobs.putAll(kept);
      for (int i = 0; i < 200 && arbiter.jobs.containsKey(r.jobId); i++) {
        Thread.sleep(20);
      }
      assertTrue(arbiter.jobs.isEmpty(), "no query left counted");
    } finally {
      Registrations.retryDelayMs = 2000;
    }
  }

  @Test
  void unknownJobAtUnregisterIsNotAnError() {
    ArbiterSettings s = settings(arbiter.port());
    Registration r = Registrations.ensure(s, "q", "u");
    arbiter.jobs.clear(); // the arbiter restarted and forgot it
    Registrations.release("q");
    assertTrue(Registrations.PENDING_UNREGISTER.isEmpty());
    assertTrue(!Registrations.OUTAGE.isDown());
    assertThrows(StatusRuntimeException.class, () -> ArbiterClient.unregister(r));
  }

  @Test
  void settings() {
    assertNull(ArbiterSettings.from(k -> null));
    Map<String, String> m = new HashMap<>();
    m.put(ArbiterSettings.ADDRESS, " arb.example:50051 ");
    m.put("hive.querylog.location", "/var/log/hive");
    ArbiterSettings s = ArbiterSettings.from(m::get);
    assertEquals("arb.example", s.host);
    assertEquals(50051, s.port);
    assertEquals(2000, s.timeoutMs);
    assertEquals("analytics", s.queue);
    assertEquals(false, s.tls);
    assertEquals("/var/log/hive/arbiter-plans.jsonl", s.planLog);
    m.put(ArbiterSettings.ADDRESS, "[::1]:7");
    assertEquals("::1", ArbiterSettings.from(m::get).host);
    m.put(ArbiterSettings.ADDRESS, "nohostport");
    assertThrows(IllegalArgumentException.class, () -> ArbiterSettings.from(m::get));
  }

  @Test
  void aPairOfAddresses() {
    ArbiterSettings s = settingsAt(" 127.0.0.1:1 , [::1]:2,127.0.0.1:1");
    assertEquals(java.util.Arrays.asList("127.0.0.1:1", "[::1]:2"), s.addresses);
    assertEquals("127.0.0.1:1", s.address);
    assertEquals(2, s.candidates().size());
    assertEquals("::1", s.candidates().get(1).host);
    assertEquals(2, s.candidates().get(1).port);
    assertSame(s, s.candidates().get(0));
    assertThrows(IllegalArgumentException.class, () -> settingsAt("127.0.0.1:1,,127.0.0.1:2"));
    assertThrows(IllegalArgumentException.class, () -> settingsAt("127.0.0.1:1,nohostport"));
  }

  @Test
  void registersWithTheActiveWhenTheFirstAddressIsTheStandby() throws Exception {
    FakeArbiter active = new FakeArbiter(0);
    try {
      arbiter.standby = true;
      ArbiterSettings s = settingsAt("127.0.0.1:" + arbiter.port() + ",127.0.0.1:" + active.port());
      Registration r = Registrations.ensure(s, "q1", "alice");
      assertNotNull(r);
      assertEquals("127.0.0.1:" + active.port(), r.settings.address);
      assertEquals(1, active.jobs.size());
      assertTrue(arbiter.jobs.isEmpty());
      assertTrue(!Registrations.OUTAGE.isDown());
      // the next query goes to the active first: the standby is not asked again
      assertNotNull(Registrations.ensure(s, "q2", "bob"));
      assertEquals(1, arbiter.registerCalls.get());
      assertEquals(2, active.jobs.size());
      // the share is read from, and the job left at, the arbiter that registered it
      assertEquals(2, ArbiterClient.currentShare(r).activeJobs);
      Registrations.release("q1");
      Registrations.release("q2");
      assertTrue(active.jobs.isEmpty());
    } finally {
      active.stop();
    }
  }

  @Test
  void failsOverWhenTheActiveDiesAndTheStandbyTakesOver() throws Exception {
    FakeArbiter second = new FakeArbiter(0);
    try {
      second.standby = true;
      ArbiterSettings s = settingsAt("127.0.0.1:" + arbiter.port() + ",127.0.0.1:" + second.port());
      assertEquals("127.0.0.1:" + arbiter.port(), Registrations.ensure(s, "before", "u").settings.address);
      Registrations.release("before");
      arbiter.stop(); // kill the active: nothing listens at its address any more
      arbiter = null;
      second.standby = false; // the standby won the election
      Registration r = Registrations.ensure(s, "after", "u");
      assertNotNull(r);
      assertEquals("127.0.0.1:" + second.port(), r.settings.address);
      assertEquals(1, second.jobs.size());
      assertTrue(!Registrations.OUTAGE.isDown());
      Registrations.release("after");
      assertTrue(second.jobs.isEmpty());
    } finally {
      second.stop();
    }
  }

  @Test
  void aDeadFirstAddressFallsThroughToTheLiveOne() throws Exception {
    int dead = freePort();
    ArbiterSettings s = settingsAt("127.0.0.1:" + dead + ",127.0.0.1:" + arbiter.port());
    Registration r = Registrations.ensure(s, "q", "u");
    assertNotNull(r);
    assertEquals(1, arbiter.jobs.size());
  }

  @Test
  void aRefusedCredentialIsNotRetriedAtTheOtherArbiter() throws Exception {
    FakeArbiter second = new FakeArbiter(0);
    try {
      arbiter.requiredServiceToken = "right";
      ArbiterSettings s = settingsAt("127.0.0.1:" + arbiter.port() + ",127.0.0.1:" + second.port(),
          ArbiterSettings.SERVICE_TOKEN, "wrong");
      assertNull(Registrations.ensure(s, "q", "u"));
      assertEquals(0, second.registerCalls.get());
      assertTrue(Registrations.OUTAGE.isDown());
    } finally {
      second.stop();
    }
  }

  @Test
  void bothArbitersDownQueriesRunAndFailFast() throws Exception {
    int a = freePort();
    int b = freePort();
    ArbiterSettings s = settingsAt("127.0.0.1:" + a + ",127.0.0.1:" + b);
    assertNull(Registrations.ensure(s, "down0", "u"));
    assertTrue(Registrations.OUTAGE.isDown());
    long t0 = System.nanoTime();
    for (int i = 1; i <= 20; i++) {
      assertNull(Registrations.ensure(s, "down" + i, "u"));
      Registrations.release("down" + i);
    }
    long perQueryMs = (System.nanoTime() - t0) / 1_000_000 / 20;
    assertTrue(perQueryMs < 100, "a query costs " + perQueryMs + " ms while both arbiters are down");
  }
}
