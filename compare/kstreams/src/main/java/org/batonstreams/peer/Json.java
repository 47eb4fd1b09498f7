package org.batonstreams.peer;

import java.util.Collection;

/** Just enough JSON writing for the status line. */
final class Json {
    static void string(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        b.append('"');
    }

    static void strings(StringBuilder b, Collection<String> ss) {
        b.append('[');
        boolean first = true;
        for (String s : ss) {
            if (!first) {
                b.append(',');
            }
            first = false;
            string(b, s);
        }
        b.append(']');
    }

    private Json() {
    }
}
