package org.yarnarbiter.hive;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

/** One warning per outage, not one per query. */
class OutageLogTest {

  static final class ListSink implements OutageLog.Sink {
    final List<String> warns = new ArrayList<>();
    final List<String> infos = new ArrayList<>();
    final List<String> debugs = new ArrayList<>();

    @Override
    public void warn(String message) {
      warns.add(message);
    }

    @Override
    public void info(String message) {
      infos.add(message);
    }

    @Override
    public void debug(String message) {
      debugs.add(message);
    }
  }

  @Test
  void warnsOncePerOutage() {
    ListSink sink = new ListSink();
    OutageLog log = new OutageLog(sink);
    log.success(); // nothing to end
    assertTrue(sink.infos.isEmpty());

    assertTrue(log.failure("RegisterQuery", new IOException("connection refused")));
    for (int i = 0; i < 20; i++) {
      assertFalse(log.failure("RegisterQuery", new IOException("connection refused")));
    }
    assertEquals(1, sink.warns.size());
    assertTrue(sink.warns.get(0).contains("RegisterQuery failed: IOException: connection refused"));
    assertEquals(20, sink.debugs.size());
    assertTrue(log.isDown());

    log.success();
    log.success();
    assertEquals(1, sink.infos.size());
    assertFalse(log.isDown());

    assertTrue(log.failure("UnregisterQuery", new IllegalStateException("UNAVAILABLE")));
    assertFalse(log.failure("UnregisterQuery", null));
    assertEquals(2, sink.warns.size());
  }

  @Test
  void concurrentFailuresWarnOnce() throws InterruptedException {
    ListSink sink = new ListSink();
    OutageLog log = new OutageLog(new OutageLog.Sink() {
      @Override
      public synchronized void warn(String m) {
        sink.warn(m);
      }

      @Override
      public synchronized void info(String m) {
        sink.info(m);
      }

      @Override
      public void debug(String m) {}
    });
    Thread[] ts = new Thread[8];
    for (int i = 0; i < ts.length; i++) {
      ts[i] = new Thread(() -> {
        for (int j = 0; j < 1000; j++) {
          log.failure("x", null);
        }
      });
      ts[i].start();
    }
    for (Thread t : ts) {
      t.join();
    }
    assertEquals(1, sink.warns.size());
  }
}
