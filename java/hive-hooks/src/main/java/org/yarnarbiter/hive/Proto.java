package org.yarnarbiter.hive;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * The few protobuf (proto3) messages of the arbiter's QueryShare service (QOOP's per-query
 * resource feedback: register a query, read its max-min share, unregister it)
 * ({@code protos/yarnarbiter/v1/arbiter.proto}, package {@code yarnarbiter.v1}), encoded and
 * decoded by hand so the hooks need neither protoc nor protobuf-java: a varint /
 * length-delimited {@link Writer} and {@link Reader}, and one method per message.
 *
 * <p>Decoders skip unknown fields (any wire type), so newer arbiters that add fields still
 * decode; encoders leave out fields holding their proto3 default, as protobuf does.
 */
public final class Proto {
  static final int VARINT = 0;
  static final int FIXED64 = 1;
  static final int LEN = 2;
  static final int FIXED32 = 5;

  private Proto() {}

  // ------------------------------------------------------------------ messages

  /** {@code RegisterQueryRequest { string query_name = 1; string user = 2; string queue = 3; }} */
  public static byte[] registerQueryRequest(String queryName, String user, String queue) {
    return new Writer().string(1, queryName).string(2, user).string(3, queue).toByteArray();
  }

  /** {@code RegisterQueryResponse { string job_id = 1; string job_token = 2; }} */
  public static byte[] registerQueryResponse(String jobId, String jobToken) {
    return new Writer().string(1, jobId).string(2, jobToken).toByteArray();
  }

  /** Decodes a RegisterQueryResponse into {@code {job_id, job_token}}. */
  public static String[] decodeRegisterQueryResponse(byte[] data) {
    String jobId = "";
    String token = "";
    Reader r = new Reader(data);
    for (int tag; (tag = r.tag()) != 0; ) {
      switch (tag) {
        case (1 << 3) | LEN: jobId = r.string(); break;
        case (2 << 3) | LEN: token = r.string(); break;
        default: r.skip(tag);
      }
    }
    return new String[] {jobId, token};
  }

  /**
   * {@code SubscribeShareRequest { string job_id = 1; }} and {@code UnregisterQueryRequest
   * { string job_id = 1; }}: the same bytes.
   */
  public static byte[] jobIdRequest(String jobId) {
    return new Writer().string(1, jobId).toByteArray();
  }

  /** Decodes the job_id of a SubscribeShareRequest / UnregisterQueryRequest. */
  public static String decodeJobIdRequest(byte[] data) {
    String jobId = "";
    Reader r = new Reader(data);
    for (int tag; (tag = r.tag()) != 0; ) {
      if (tag == ((1 << 3) | LEN)) {
        jobId = r.string();
      } else {
        r.skip(tag);
      }
    }
    return jobId;
  }

  /**
   * {@code ShareUpdate { string job_id = 1; uint64 epoch = 2; ResourceVector fair_share = 3;
   * uint32 active_jobs = 4; ShareCause cause = 5; }} with {@code ResourceVector { double vcores = 1;
   * double memory_mb = 2; double disk_mb_per_s = 3; double network_mb_per_s = 4; }}.
   */
  public static byte[] shareUpdate(ShareUpdate u) {
    Writer w = new Writer().string(1, u.jobId).uint64(2, u.epoch);
    if (u.hasFairShare) {
      byte[] vector = new Writer()
          .dbl(1, u.vcores).dbl(2, u.memoryMb).dbl(3, u.diskMbPerS).dbl(4, u.networkMbPerS)
          .toByteArray();
      w.message(3, vector);
    }
    return w.uint64(4, u.activeJobs).uint64(5, u.cause).toByteArray();
  }

  /** Decodes a ShareUpdate. */
  public static ShareUpdate decodeShareUpdate(byte[] data) {
    ShareUpdate u = new ShareUpdate();
    Reader r = new Reader(data);
    for (int tag; (tag = r.tag()) != 0; ) {
      switch (tag) {
        case (1 << 3) | LEN: u.jobId = r.string(); break;
        case (2 << 3) | VARINT: u.epoch = r.varint(); break;
        case (3 << 3) | LEN:
          u.hasFairShare = true;
          Reader v = new Reader(r.bytes());
          for (int t; (t = v.tag()) != 0; ) {
            switch (t) {
              case (1 << 3) | FIXED64: u.vcores = v.dbl(); break;
              case (2 << 3) | FIXED64: u.memoryMb = v.dbl(); break;
              case (3 << 3) | FIXED64: u.diskMbPerS = v.dbl(); break;
              case (4 << 3) | FIXED64: u.networkMbPerS = v.dbl(); break;
              default: v.skip(t);
            }
          }
          break;
        case (4 << 3) | VARINT: u.activeJobs = r.varint() & 0xFFFFFFFFL; break;
        case (5 << 3) | VARINT: u.cause = (int) r.varint(); break;
        default: r.skip(tag);
      }
    }
    return u;
  }

  // ------------------------------------------------------------------ wire format

  /** Appends fields; proto3 defaults (empty string, 0) are left out. */
  public static final class Writer {
    private final ByteArrayOutputStream out = new ByteArrayOutputStream(64);

    public Writer string(int field, String value) {
      if (value == null || value.isEmpty()) {
        return this;
      }
      return message(field, value.getBytes(StandardCharsets.UTF_8));
    }

    /** A length-delimited field (bytes, string or embedded message), written even if empty. */
    public Writer message(int field, byte[] value) {
      rawVarint(((long) field << 3) | LEN);
      rawVarint(value.length);
      out.write(value, 0, value.length);
      return this;
    }

    /** uint64 / uint32 / enum / int64 as a varint (a negative long takes 10 bytes). */
    public Writer uint64(int field, long value) {
      if (value == 0) {
        return this;
      }
      rawVarint(((long) field << 3) | VARINT);
      rawVarint(value);
      return this;
    }

    public Writer dbl(int field, double value) {
      if (Double.doubleToRawLongBits(value) == 0L) { // +0.0 is the default; -0.0 is written
        return this;
      }
      rawVarint(((long) field << 3) | FIXED64);
      long bits = Double.doubleToRawLongBits(value);
      for (int i = 0; i < 8; i++) {
        out.write((int) (bits >>> (8 * i)) & 0xFF);
      }
      return this;
    }

    void rawVarint(long value) {
      while ((value & ~0x7FL) != 0) {
        out.write((int) ((value & 0x7F) | 0x80));
        value >>>= 7;
      }
      out.write((int) value);
    }

    public byte[] toByteArray() {
      return out.toByteArray();
    }
  }

  /** Reads fields in order; {@link #tag()} is 0 at the end. Malformed input throws. */
  public static final class Reader {
    private final byte[] buf;
    private int pos;

    public Reader(byte[] buf) {
      this.buf = buf;
    }

    /** The next field's tag ({@code field << 3 | wire type}), 0 at the end of the message. */
    public int tag() {
      if (pos >= buf.length) {
        return 0;
      }
      long tag = varint();
      if (tag >>> 3 == 0 || tag > Integer.MAX_VALUE) {
        throw new IllegalArgumentException("bad protobuf tag " + tag);
      }
      return (int) tag;
    }

    public long varint() {
      long result = 0;
      for (int shift = 0; shift < 64; shift += 7) {
        byte b = next();
        result |= (long) (b & 0x7F) << shift;
        if ((b & 0x80) == 0) {
          return result;
        }
      }
      throw new IllegalArgumentException("malformed varint");
    }

    public long fixed64() {
      long v = 0;
      for (int i = 0; i < 8; i++) {
        v |= (long) (next() & 0xFF) << (8 * i);
      }
      return v;
    }

    public double dbl() {
      return Double.longBitsToDouble(fixed64());
    }

    public byte[] bytes() {
      long len = varint();
      if (len < 0 || len > buf.length - pos) {
        throw new IllegalArgumentException("truncated length-delimited field");
      }
      byte[] b = Arrays.copyOfRange(buf, pos, pos + (int) len);
      pos += (int) len;
      return b;
    }

    public String string() {
      return new String(bytes(), StandardCharsets.UTF_8);
    }

    /** Skips the value of a field with this tag. */
    public void skip(int tag) {
      switch (tag & 7) {
        case VARINT: varint(); break;
        case FIXED64: advance(8); break;
        case LEN: bytes(); break;
        case FIXED32: advance(4); break;
        default: throw new IllegalArgumentException("unsupported wire type " + (tag & 7));
      }
    }

    private void advance(int n) {
      if (n > buf.length - pos) {
        throw new IllegalArgumentException("truncated field");
      }
      pos += n;
    }

    private byte next() {
      if (pos >= buf.length) {
        throw new IllegalArgumentException("truncated message");
      }
      return buf[pos++];
    }
  }
}
