package org.yarnarbiter.am;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.IntConsumer;

/**
 * The sidecar process of {@link LeaseApplicationMaster}: {@code bash -c command}, whose stdout
 * lines go to {@code onLine} (on a reader thread, in order), whose stderr is the AM's stderr,
 * and whose stdin takes the AM's messages ({@link #send}: thread-safe and never blocking, a
 * writer thread drains a queue, so the AM's lock is never held across a pipe write). {@code
 * onExit} gets the exit code once its stdout closes.
 */
final class Sidecar {
  private final String command;
  private final Consumer<String> onLine;
  private final IntConsumer onExit;
  private final BlockingQueue<String> outbox = new LinkedBlockingQueue<>();
  private static final String CLOSE = "\u0000close";
  private Process process;

  Sidecar(String command, Consumer<String> onLine, IntConsumer onExit) {
    this.command = command;
    this.onLine = onLine;
    this.onExit = onExit;
  }

  void start() throws IOException {
    ProcessBuilder pb = new ProcessBuilder("bash", "-c", command);
    pb.redirectError(ProcessBuilder.Redirect.INHERIT);
    process = pb.start();
    Thread reader = new Thread(this::readLoop, "sidecar-reader");
    reader.setDaemon(true);
    reader.start();
    Thread writer = new Thread(this::writeLoop, "sidecar-writer");
    writer.setDaemon(true);
    writer.start();
    LeaseApplicationMaster.log("sidecar started: " + command);
  }

  private void readLoop() {
    try (BufferedReader out = new BufferedReader(
        new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
      String line;
      while ((line = out.readLine()) != null) {
        if (!line.isEmpty()) {
          onLine.accept(line);
        }
      }
    } catch (IOException e) {
      LeaseApplicationMaster.log("reading the sidecar failed: " + e);
    }
    int code;
    try {
      code = process.waitFor();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      code = -1;
    }
    LeaseApplicationMaster.log("sidecar exited with " + code);
    onExit.accept(code);
  }

  private void writeLoop() {
    try (Writer in = new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8)) {
      while (true) {
        String line = outbox.take();
        if (line == CLOSE) {
          return;
        }
        try {
          in.write(line);
          in.write('\n');
          in.flush();
        } catch (IOException e) {
          LeaseApplicationMaster.log("cannot write to the sidecar (" + e.getMessage() + "): "
              + line);
        }
      }
    } catch (IOException e) {
      LeaseApplicationMaster.log("closing the sidecar's stdin: " + e.getMessage());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** One message: fields joined by tabs, one line (queued; a sidecar that is gone is fine). */
  void send(String... fields) {
    outbox.add(String.join("\t", fields));
  }

  /** Close its stdin (its cue to leave) after what is queued, wait a little, then end it. */
  void stop() {
    if (process == null) {
      return;
    }
    outbox.add(CLOSE);
    try {
      if (!process.waitFor(10, TimeUnit.SECONDS)) {
        LeaseApplicationMaster.log("the sidecar did not exit; killing it");
        process.destroy();
        if (!process.waitFor(5, TimeUnit.SECONDS)) {
          process.destroyForcibly();
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
