package org.yarnarbiter.hive;

import java.io.ByteArrayInputStream;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.util.Iterator;
import java.util.concurrent.TimeUnit;

import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLSocketFactory;
import javax.net.ssl.TrustManager;
import javax.net.ssl.TrustManagerFactory;
import javax.net.ssl.X509TrustManager;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptors;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.okhttp.OkHttpChannelBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.MetadataUtils;

/**
 * The QueryShare client of the hooks (QOOP's per-query resource feedback: a query registers
 * with the arbiter, which counts it in |J| and streams its max-min fair share R / |J|).
 *
 * <p>Calls go through {@code MethodDescriptor<byte[], byte[]>}s with a pass-through marshaller
 * and hand-encoded messages ({@link Proto}), over one lazily created okhttp channel per JVM,
 * replaced when the address (or TLS setting) changes and shut down at JVM exit. Every call has
 * the configured deadline; errors are thrown as they come ({@code StatusRuntimeException}),
 * the hooks decide what to do with them.
 */
public final class ArbiterClient {
  static final String SERVICE = "yarnarbiter.v1.QueryShare";
  static final Metadata.Key<String> SERVICE_TOKEN =
      Metadata.Key.of("x-service-token", Metadata.ASCII_STRING_MARSHALLER);
  static final Metadata.Key<String> APP_TOKEN =
      Metadata.Key.of("x-app-token", Metadata.ASCII_STRING_MARSHALLER);

  static final MethodDescriptor.Marshaller<byte[]> BYTES = new MethodDescriptor.Marshaller<byte[]>() {
    @Override
    public InputStream stream(byte[] value) {
      return new ByteArrayInputStream(value);
    }

    @Override
    public byte[] parse(InputStream stream) {
      try {
        return readAll(stream);
      } catch (IOException e) {
        throw new IllegalStateException("reading a gRPC message", e);
      }
    }
  };

  static final MethodDescriptor<byte[], byte[]> REGISTER_QUERY =
      method("RegisterQuery", MethodDescriptor.MethodType.UNARY);
  static final MethodDescriptor<byte[], byte[]> SUBSCRIBE_SHARE =
      method("SubscribeShare", MethodDescriptor.MethodType.SERVER_STREAMING);
  static final MethodDescriptor<byte[], byte[]> UNREGISTER_QUERY =
      method("UnregisterQuery", MethodDescriptor.MethodType.UNARY);

  /** A query's registration: RegisterQuery's answer and the arbiter it was made with. */
  public static final class Registration {
    public final String jobId;
    final String jobToken;
    final ArbiterSettings settings;

    Registration(String jobId, String jobToken, ArbiterSettings settings) {
      this.jobId = jobId;
      this.jobToken = jobToken;
      this.settings = settings;
    }

    @Override
    public String toString() {
      return jobId + "@" + settings.address;
    }
  }

  private static final Object LOCK = new Object();
  /** One channel per arbiter (address and TLS setting): two for an active/standby pair. */
  private static final java.util.Map<String, ManagedChannel> CHANNELS = new java.util.HashMap<>();
  /** Bounds the channels kept when settings keep changing (sessions cannot change them). */
  static final int MAX_CHANNELS = 8;
  private static boolean shutdownHookAdded;

  private ArbiterClient() {}

  static MethodDescriptor<byte[], byte[]> method(String name, MethodDescriptor.MethodType type) {
    return MethodDescriptor.<byte[], byte[]>newBuilder()
        .setType(type)
        .setFullMethodName(MethodDescriptor.generateFullMethodName(SERVICE, name))
        .setRequestMarshaller(BYTES)
        .setResponseMarshaller(BYTES)
        .build();
  }

  /** RegisterQuery with {@code x-service-token} (when configured): the query joins |J|. */
  public static Registration register(ArbiterSettings s, String queryName, String user)
      throws IOException {
    return register(s, queryName, user, false);
  }

  /**
   * RegisterQuery; {@code waitForReady}: wait (within the deadline) for the channel to connect
   * rather than fail at once if it is not connected (used right after a successful probe).
   */
  static Registration register(ArbiterSettings s, String queryName, String user,
      boolean waitForReady) throws IOException {
    Metadata md = new Metadata();
    String token = s.serviceToken();
    if (token != null) {
      md.put(SERVICE_TOKEN, token);
    }
    byte[] answer = ClientCalls.blockingUnaryCall(
        withHeaders(channel(s), md), REGISTER_QUERY,
        waitForReady ? options(s).withWaitForReady() : options(s),
        Proto.registerQueryRequest(queryName, user, s.queue));
    String[] r = Proto.decodeRegisterQueryResponse(answer);
    if (r[0].isEmpty()) {
      throw new IllegalStateException("RegisterQuery answered without a job_id");
    }
    return new Registration(r[0], r[1], s);
  }

  /** UnregisterQuery with the job's {@code x-app-token}: the query leaves |J|. */
  public static void unregister(Registration r) {
    ClientCalls.blockingUnaryCall(
        withHeaders(channel(r.settings), appToken(r)), UNREGISTER_QUERY, options(r.settings),
        Proto.jobIdRequest(r.jobId));
  }

  /**
   * SubscribeShare for the job, the first ShareUpdate of the stream (the arbiter sends the
   * current share on subscribing), then the call is cancelled.
   */
  public static ShareUpdate currentShare(Registration r) {
    Channel ch = withHeaders(channel(r.settings), appToken(r));
    ClientCall<byte[], byte[]> call = ch.newCall(SUBSCRIBE_SHARE, options(r.settings));
    try {
      Iterator<byte[]> it =
          ClientCalls.blockingServerStreamingCall(call, Proto.jobIdRequest(r.jobId));
      if (!it.hasNext()) {
        throw new IllegalStateException("SubscribeShare ended without a ShareUpdate");
      }
      return Proto.decodeShareUpdate(it.next());
    } finally {
      call.cancel("first share read", null);
    }
  }

  private static Metadata appToken(Registration r) {
    Metadata md = new Metadata();
    if (r.jobToken != null && !r.jobToken.isEmpty()) {
      md.put(APP_TOKEN, r.jobToken);
    }
    return md;
  }

  private static Channel withHeaders(Channel ch, Metadata md) {
    return ClientInterceptors.intercept(ch, MetadataUtils.newAttachHeadersInterceptor(md));
  }

  private static CallOptions options(ArbiterSettings s) {
    return CallOptions.DEFAULT.withDeadlineAfter(s.timeoutMs, TimeUnit.MILLISECONDS);
  }

  /**
   * The channel for these settings' arbiter: created on first use and kept (one per address of
   * a pair); when more than {@link #MAX_CHANNELS} would be kept, the others are shut down.
   */
  static ManagedChannel channel(ArbiterSettings s) {
    String key = s.channelKey();
    java.util.List<ManagedChannel> old = new java.util.ArrayList<>();
    ManagedChannel ch;
    synchronized (LOCK) {
      ch = CHANNELS.get(key);
      if (ch == null) {
        if (CHANNELS.size() >= MAX_CHANNELS) {
          old.addAll(CHANNELS.values());
          CHANNELS.clear();
        }
        ch = build(s);
        CHANNELS.put(key, ch);
        if (!shutdownHookAdded) {
          shutdownHookAdded = true;
          Runtime.getRuntime().addShutdownHook(
              new Thread(ArbiterClient::atExit, "yarn-arbiter-hooks-shutdown"));
        }
      }
    }
    for (ManagedChannel c : old) {
      c.shutdown(); // calls in flight on it finish
    }
    return ch;
  }

  /**
   * During an outage: is anything listening at the arbiter's address? A plain TCP connect
   * within {@code budgetMs}, so that queries fail fast (about a millisecond for a refused
   * connection) while the arbiter is down. The channel cannot tell: after a failure it stays
   * in TRANSIENT_FAILURE while it retries with backoff. If the port answers, the channel's
   * backoff is reset so that the next call (made wait-for-ready) connects at once.
   */
  static boolean probe(ArbiterSettings s, long budgetMs) {
    try (Socket socket = new Socket()) {
      socket.connect(new InetSocketAddress(s.host, s.port), (int) Math.max(1, budgetMs));
    } catch (IOException e) {
      return false;
    }
    channel(s).resetConnectBackoff();
    return true;
  }

  private static ManagedChannel build(ArbiterSettings s) {
    OkHttpChannelBuilder b = OkHttpChannelBuilder.forAddress(s.host, s.port)
        .userAgent("yarn-arbiter-hive-hooks");
    if (s.tls) {
      b.useTransportSecurity();
      if (s.tlsCa != null) {
        try {
          b.sslSocketFactory(socketFactory(s.tlsCa));
        } catch (IOException | GeneralSecurityException e) {
          throw new IllegalArgumentException(
              ArbiterSettings.TLS_CA + " " + s.tlsCa + ": " + OutageLog.describe(e), e);
        }
      }
    } else {
      b.usePlaintext();
    }
    return b.build();
  }

  /** TLS trusting the JVM's default trust store plus the CA certificates of a PEM file. */
  static SSLSocketFactory socketFactory(String caPem) throws IOException, GeneralSecurityException {
    KeyStore ks = KeyStore.getInstance(KeyStore.getDefaultType());
    ks.load(null, null);
    int n = 0;
    TrustManagerFactory dflt = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    dflt.init((KeyStore) null);
    for (TrustManager tm : dflt.getTrustManagers()) {
      if (tm instanceof X509TrustManager) {
        for (X509Certificate c : ((X509TrustManager) tm).getAcceptedIssuers()) {
          ks.setCertificateEntry("default-" + n++, c);
        }
      }
    }
    int added = 0;
    try (InputStream in = new FileInputStream(caPem)) {
      for (Certificate c : CertificateFactory.getInstance("X.509").generateCertificates(in)) {
        ks.setCertificateEntry("ca-" + n++, c);
        added++;
      }
    }
    if (added == 0) {
      throw new GeneralSecurityException("no certificate in " + caPem);
    }
    TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
    tmf.init(ks);
    SSLContext ctx = SSLContext.getInstance("TLS");
    ctx.init(null, tmf.getTrustManagers(), null);
    return ctx.getSocketFactory();
  }

  private static void atExit() {
    try {
      Registrations.unregisterAll(5000);
    } catch (Throwable ignored) {
      // best effort at JVM exit
    }
    reset();
  }

  /** Close the channels so the next call builds new ones (JVM exit, tests). */
  static void reset() {
    java.util.List<ManagedChannel> chs;
    synchronized (LOCK) {
      chs = new java.util.ArrayList<>(CHANNELS.values());
      CHANNELS.clear();
    }
    for (ManagedChannel ch : chs) {
      ch.shutdownNow();
    }
  }

  static byte[] readAll(InputStream in) throws IOException {
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream(256);
    byte[] buf = new byte[4096];
    for (int n; (n = in.read(buf)) > 0; ) {
      out.write(buf, 0, n);
    }
    return out.toByteArray();
  }
}
