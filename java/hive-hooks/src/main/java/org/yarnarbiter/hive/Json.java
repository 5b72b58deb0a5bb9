package org.yarnarbiter.hive;

import java.util.List;

/**
 * A minimal JSON writer for the plan log's lines of {@link ArbiterPlanHook} (the plan Hive chose
 * next to QOOP's per-query resource feedback, the arbiter's max-min share); no JSON library on
 * HiveServer2's classpath is relied on.
 */
final class Json {
  private Json() {}

  static String quote(String s) {
    if (s == null) {
      return "null";
    }
    StringBuilder b = new StringBuilder(s.length() + 2).append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"': b.append("\\\""); break;
        case '\\': b.append("\\\\"); break;
        case '\n': b.append("\\n"); break;
        case '\r': b.append("\\r"); break;
        case '\t': b.append("\\t"); break;
        default:
          if (c < 0x20 || c == 0x2028 || c == 0x2029) {
            b.append(String.format("\\u%04x", (int) c));
          } else {
            b.append(c);
          }
      }
    }
    return b.append('"').toString();
  }

  static String number(double d) {
    if (Double.isNaN(d) || Double.isInfinite(d)) {
      return "null";
    }
    if (d == Math.rint(d) && Math.abs(d) < 1e15) {
      return Long.toString((long) d);
    }
    return Double.toString(d);
  }

  static String array(List<String> jsonValues) {
    return "[" + String.join(",", jsonValues) + "]";
  }

  static String strings(List<String> values) {
    StringBuilder b = new StringBuilder("[");
    for (int i = 0; i < values.size(); i++) {
      b.append(i == 0 ? "" : ",").append(quote(values.get(i)));
    }
    return b.append(']').toString();
  }

  /** An object built field by field, in insertion order. */
  static final class Obj {
    private final StringBuilder b = new StringBuilder("{");

    Obj raw(String key, String json) {
      if (b.length() > 1) {
        b.append(',');
      }
      b.append(quote(key)).append(':').append(json == null ? "null" : json);
      return this;
    }

    Obj put(String key, String value) {
      return raw(key, quote(value));
    }

    /** A number already formatted as a decimal string (e.g. an unsigned 64-bit value). */
    Obj put(String key, String decimal, boolean isNumber) {
      return raw(key, isNumber ? decimal : quote(decimal));
    }

    Obj put(String key, double value) {
      return raw(key, number(value));
    }

    Obj put(String key, long value) {
      return raw(key, Long.toString(value));
    }

    @Override
    public String toString() {
      return b.toString() + "}";
    }
  }
}
