package org.batonstreams.peer;

import java.util.HashMap;
import java.util.Map;
import java.util.Set;

/**
 * The command line, parsed by hand: {@code --name value} or
 * {@code --name=value}. Every error is one line naming the flag.
 */
final class Flags {
    static final class Bad extends Exception {
        Bad(String msg) {
            super(msg);
        }
    }

    static final Set<String> REQUIRED = Set.of("brokers", "app-id", "instance", "input", "output", "state-dir");
    static final Set<String> OPTIONAL = Set.of("standbys", "guarantee", "threads", "acceptable-lag",
            "max-warmups", "probing-interval-ms", "group-protocol", "commit-interval-ms", "http");
    static final String[] ORDER = {"brokers", "app-id", "instance", "input", "output", "state-dir"};

    String brokers, appId, instance, input, output, stateDir;
    int standbys = 0;
    boolean exactlyOnce = false;
    int threads = 1;
    Long acceptableLag;
    Integer maxWarmups;
    Long probingIntervalMs;
    String groupProtocol = "classic";
    Long commitIntervalMs;
    String httpHost;
    int httpPort = -1;

    static Flags parse(String[] args) throws Bad {
        Map<String, String> v = new HashMap<>();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (!a.startsWith("--") || a.length() == 2) {
                throw new Bad("unexpected argument " + quote(a) + " (flags are --name value)");
            }
            String name = a.substring(2);
            String value = null;
            int eq = name.indexOf('=');
            if (eq >= 0) {
                value = name.substring(eq + 1);
                name = name.substring(0, eq);
            }
            if (!REQUIRED.contains(name) && !OPTIONAL.contains(name)) {
                throw new Bad("unknown flag --" + name);
            }
            if (value == null) {
                if (i + 1 >= args.length) {
                    throw new Bad("flag --" + name + " needs a value");
                }
                value = args[++i];
            }
            if (v.put(name, value) != null) {
                throw new Bad("flag --" + name + " given twice");
            }
        }
        for (String name : ORDER) {
            String s = v.get(name);
            if (s == null || s.isEmpty()) {
                throw new Bad("missing required flag --" + name);
            }
        }
        Flags f = new Flags();
        f.brokers = v.get("brokers");
        f.appId = v.get("app-id");
        f.instance = v.get("instance");
        f.input = v.get("input");
        f.output = v.get("output");
        f.stateDir = v.get("state-dir");
        if (v.containsKey("standbys")) {
            f.standbys = (int) number(v, "standbys", 0, 100);
        }
        if (v.containsKey("threads")) {
            f.threads = (int) number(v, "threads", 1, 1000);
        }
        if (v.containsKey("guarantee")) {
            switch (v.get("guarantee")) {
                case "at-least-once" -> f.exactlyOnce = false;
                case "exactly-once" -> f.exactlyOnce = true;
                default -> throw new Bad("flag --guarantee: want at-least-once or exactly-once, got "
                        + quote(v.get("guarantee")));
            }
        }
        if (v.containsKey("group-protocol")) {
            switch (v.get("group-protocol")) {
                case "classic", "streams" -> f.groupProtocol = v.get("group-protocol");
                default -> throw new Bad("flag --group-protocol: want classic or streams, got "
                        + quote(v.get("group-protocol")));
            }
        }
        if (v.containsKey("acceptable-lag")) {
            f.acceptableLag = number(v, "acceptable-lag", 0, Long.MAX_VALUE);
        }
        if (v.containsKey("max-warmups")) {
            f.maxWarmups = (int) number(v, "max-warmups", 1, Integer.MAX_VALUE);
        }
        if (v.containsKey("probing-interval-ms")) {
            f.probingIntervalMs = number(v, "probing-interval-ms", 60_000, Long.MAX_VALUE);
            if (f.groupProtocol.equals("streams")) {
                // The broker-side assignor of KIP-1071 has no probing
                // rebalances: it reassigns as members report their lags.
                throw new Bad("flag --probing-interval-ms: Kafka Streams has no probing rebalances under --group-protocol streams");
            }
        }
        if (v.containsKey("http")) {
            String a = v.get("http");
            int colon = a.lastIndexOf(':');
            int port = -1;
            try {
                port = colon > 0 ? Integer.parseInt(a.substring(colon + 1)) : -1;
            } catch (NumberFormatException e) {
                port = -1;
            }
            if (port < 1 || port > 65535) {
                throw new Bad("flag --http: want HOST:PORT with a port from 1 to 65535, got " + quote(a));
            }
            f.httpHost = a.substring(0, colon);
            f.httpPort = port;
        }
        if (v.containsKey("commit-interval-ms")) {
            f.commitIntervalMs = number(v, "commit-interval-ms", 0, Long.MAX_VALUE);
        }
        return f;
    }

    private static long number(Map<String, String> v, String name, long min, long max) throws Bad {
        String s = v.get(name);
        long n;
        try {
            n = Long.parseLong(s);
        } catch (NumberFormatException e) {
            throw new Bad("flag --" + name + ": want a whole number, got " + quote(s));
        }
        if (n < min || n > max) {
            throw new Bad("flag --" + name + ": want a number from " + min
                    + (max == Long.MAX_VALUE || max == Integer.MAX_VALUE ? " up" : " to " + max) + ", got " + s);
        }
        return n;
    }

    private static String quote(String s) {
        return "\"" + s + "\"";
    }

    private Flags() {
    }
}
