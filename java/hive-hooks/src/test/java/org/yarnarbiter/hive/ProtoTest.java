package org.yarnarbiter.hive;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;

import org.junit.jupiter.api.Test;

/**
 * The hand-written protobuf codec against bytes produced by Python's protobuf (the arbiter's
 * own generated classes, protos/yarnarbiter/v1/arbiter_pb2.py), and round trips.
 */
class ProtoTest {

  static byte[] hex(String s) {
    byte[] b = new byte[s.length() / 2];
    for (int i = 0; i < b.length; i++) {
      b[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
    }
    return b;
  }

  /**
   * pb.ShareUpdate(job_id='query-0123456789ab', epoch=300, fair_share=pb.ResourceVector(
   * vcores=24.0, memory_mb=98304.5, network_mb_per_s=125.25), active_jobs=3,
   * cause=pb.SHARE_CAUSE_JOB_ARRIVED).SerializeToString().hex()
   */
  static final String SHARE_UPDATE_PY =
      "0a1271756572792d30313233343536373839616210ac021a1b09000000000000384011000000000800f840"
          + "210000000000505f4020032802";

  /**
   * pb.ShareUpdate(job_id='q', epoch=2**63+5, fair_share=pb.ResourceVector(vcores=0.1,
   * memory_mb=-1.5), active_jobs=4000000000, cause=pb.SHARE_CAUSE_CAPACITY_CHANGED)
   */
  static final String SHARE_UPDATE_EXTREMES_PY =
      "0a017110858080808080808080011a12099a9999999999b93f11000000000000f8bf2080d0acf30e2804";

  /** pb.RegisterQueryRequest(query_name='root_20261125110512_392bf456-aaaa', user='röot', queue='analytics') */
  static final String REGISTER_REQUEST_PY =
      "0a21726f6f745f32303236313132353131303531325f33393262663435362d61616161120572c3b66f741a09"
          + "616e616c7974696373";

  /** pb.SubscribeShareRequest(job_id='query-0123456789ab'), same as UnregisterQueryRequest. */
  static final String JOB_ID_REQUEST_PY = "0a1271756572792d303132333435363738396162";

  @Test
  void decodesAShareUpdateFromPython() {
    ShareUpdate u = Proto.decodeShareUpdate(hex(SHARE_UPDATE_PY));
    assertEquals("query-0123456789ab", u.jobId);
    assertEquals(300, u.epoch);
    assertTrue(u.hasFairShare);
    assertEquals(24.0, u.vcores);
    assertEquals(98304.5, u.memoryMb);
    assertEquals(0.0, u.diskMbPerS);
    assertEquals(125.25, u.networkMbPerS);
    assertEquals(3, u.activeJobs);
    assertEquals(2, u.cause);
    assertEquals("{\"job_id\":\"query-0123456789ab\",\"epoch\":300,\"vcores\":24,"
        + "\"memory_mb\":98304.5,\"active_jobs\":3}", u.toJson());
  }

  @Test
  void decodesUnsignedExtremes() {
    ShareUpdate u = Proto.decodeShareUpdate(hex(SHARE_UPDATE_EXTREMES_PY));
    assertEquals("9223372036854775813", Long.toUnsignedString(u.epoch));
    assertEquals(4000000000L, u.activeJobs);
    assertEquals(0.1, u.vcores);
    assertEquals(-1.5, u.memoryMb);
    assertEquals(4, u.cause);
    assertTrue(u.toJson().contains("\"epoch\":9223372036854775813"));
  }

  @Test
  void encodesLikePython() {
    assertArrayEquals(hex(REGISTER_REQUEST_PY),
        Proto.registerQueryRequest("root_20261125110512_392bf456-aaaa", "r\u00f6ot", "analytics"));
    assertArrayEquals(hex(JOB_ID_REQUEST_PY), Proto.jobIdRequest("query-0123456789ab"));
    assertArrayEquals(hex(SHARE_UPDATE_PY), Proto.shareUpdate(Proto.decodeShareUpdate(hex(SHARE_UPDATE_PY))));
    assertArrayEquals(hex(SHARE_UPDATE_EXTREMES_PY),
        Proto.shareUpdate(Proto.decodeShareUpdate(hex(SHARE_UPDATE_EXTREMES_PY))));
    assertArrayEquals(new byte[0], Proto.registerQueryRequest("", null, ""));
  }

  @Test
  void roundTrips() {
    char[] big = new char[300];
    Arrays.fill(big, 'x');
    String token = "tok-\u00e9" + new String(big); // length prefix needs a 2-byte varint
    String[] r = Proto.decodeRegisterQueryResponse(Proto.registerQueryResponse("query-1", token));
    assertEquals("query-1", r[0]);
    assertEquals(token, r[1]);
    assertEquals("query-9", Proto.decodeJobIdRequest(Proto.jobIdRequest("query-9")));

    ShareUpdate u = new ShareUpdate();
    u.jobId = "query-abc";
    u.epoch = -1L; // 2^64 - 1
    u.hasFairShare = true;
    u.vcores = 1.0 / 3;
    u.memoryMb = 1e300;
    u.diskMbPerS = -0.0;
    u.networkMbPerS = Double.MIN_VALUE;
    u.activeJobs = 0xFFFFFFFFL;
    u.cause = 3;
    ShareUpdate v = Proto.decodeShareUpdate(Proto.shareUpdate(u));
    assertEquals(u.jobId, v.jobId);
    assertEquals(u.epoch, v.epoch);
    assertEquals(u.vcores, v.vcores);
    assertEquals(u.memoryMb, v.memoryMb);
    assertEquals(Double.doubleToRawLongBits(-0.0), Double.doubleToRawLongBits(v.diskMbPerS));
    assertEquals(u.networkMbPerS, v.networkMbPerS);
    assertEquals(u.activeJobs, v.activeJobs);
    assertEquals(u.cause, v.cause);

    ShareUpdate empty = Proto.decodeShareUpdate(new byte[0]);
    assertEquals("", empty.jobId);
    assertEquals(false, empty.hasFairShare);
  }

  @Test
  void skipsUnknownFieldsOfEveryWireType() {
    byte[] known = hex(SHARE_UPDATE_PY);
    Proto.Writer w = new Proto.Writer()
        .uint64(99, 12345)                 // varint
        .dbl(100, 2.5)                     // fixed64
        .string(101, "future field");      // length-delimited
    byte[] extra = w.toByteArray();
    byte[] fixed32 = {(byte) ((102 << 3 | 5) & 0x7F | 0x80), (byte) ((102 << 3 | 5) >>> 7), 1, 2, 3, 4};
    byte[] all = new byte[extra.length + fixed32.length + known.length];
    System.arraycopy(extra, 0, all, 0, extra.length);
    System.arraycopy(fixed32, 0, all, extra.length, fixed32.length);
    System.arraycopy(known, 0, all, extra.length + fixed32.length, known.length);
    ShareUpdate u = Proto.decodeShareUpdate(all);
    assertEquals("query-0123456789ab", u.jobId);
    assertEquals(300, u.epoch);
    assertEquals(98304.5, u.memoryMb);
  }

  @Test
  void rejectsTruncatedInput() {
    byte[] b = hex(SHARE_UPDATE_PY);
    assertThrows(IllegalArgumentException.class,
        () -> Proto.decodeShareUpdate(Arrays.copyOf(b, b.length - 3)));
    assertThrows(IllegalArgumentException.class,
        () -> Proto.decodeRegisterQueryResponse(new byte[] {0x0a, 0x05, 'a'}));
    assertThrows(IllegalArgumentException.class, () -> Proto.decodeShareUpdate(new byte[] {0x00}));
  }
}
