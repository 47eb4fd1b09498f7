package org.batonstreams.peer;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.URLDecoder;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyQueryMetadata;
import org.apache.kafka.streams.LagInfo;
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.errors.InvalidStateStoreException;
import org.apache.kafka.streams.state.HostInfo;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.ReadOnlyKeyValueStore;

/**
 * GET /query/STORE/KEY as baton serves it (docs/queries.md), through Kafka
 * Streams' interactive queries: the key's metadata
 * ({@code queryMetadataForKey}) names the active host and the standby
 * hosts; this instance answers from its own store when it is the active
 * (or, with max-lag, a standby within it: {@code enableStaleStores}), and
 * otherwise asks those hosts with {@code local=true}. The answer's offset
 * and lag are the store partition's {@code LagInfo} (read every 500 ms):
 * its changelog position and how far behind the changelog's end it is.
 * While no copy
 * meets the bounds it looks again every 25 ms until the timeout.
 */
final class Queries {
    static final String STORE = "counts";

    private final KafkaStreams streams;
    private final String instance;
    private final HostInfo self;
    private final HttpClient client = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
    private final Serializer<String> keys = Serdes.String().serializer();
    /**
     * The store's partition lags, read every 500 ms: allLocalStorePartitionLags
     * asks the brokers for the changelogs' ends, too slow for every read
     * (KIP-535 has applications refresh them periodically).
     */
    private volatile Map<Integer, LagInfo> lags = Map.of();

    private Queries(KafkaStreams streams, String instance, HostInfo self) {
        this.streams = streams;
        this.instance = instance;
        this.self = self;
    }

    /** Serves the endpoint on self's address until the JVM exits. */
    static void serve(KafkaStreams streams, String instance, HostInfo self) throws IOException {
        Queries q = new Queries(streams, instance, self);
        Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "query-lags");
            t.setDaemon(true);
            return t;
        }).scheduleWithFixedDelay(q::refreshLags, 0, 500, java.util.concurrent.TimeUnit.MILLISECONDS);
        HttpServer server = HttpServer.create(new InetSocketAddress(self.host(), self.port()), 64);
        server.createContext("/query/", q::handle);
        server.setExecutor(Executors.newFixedThreadPool(8, r -> {
            Thread t = new Thread(r, "query");
            t.setDaemon(true);
            return t;
        }));
        server.start();
    }

    private void refreshLags() {
        try {
            Map<Integer, LagInfo> m = streams.allLocalStorePartitionLags().get(STORE);
            lags = m == null ? Map.of() : Map.copyOf(m);
        } catch (RuntimeException e) {
            lags = Map.of(); // not running: nothing here to answer from
        }
    }

    private record Reply(int code, String body) {
    }

    private void handle(HttpExchange ex) throws IOException {
        Reply r;
        try {
            r = answer(ex);
        } catch (RuntimeException e) {
            r = error(500, Main.oneLine(e));
        }
        byte[] body = r.body.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.sendResponseHeaders(r.code, body.length);
        try (OutputStream out = ex.getResponseBody()) {
            out.write(body);
        }
    }

    private Reply answer(HttpExchange ex) {
        if (!ex.getRequestMethod().equals("GET")) {
            return error(405, "bad query: method " + ex.getRequestMethod() + "; use GET");
        }
        String raw = ex.getRequestURI().getRawPath().substring("/query/".length());
        int slash = raw.indexOf('/');
        if (slash <= 0) {
            return error(400, "bad query: path: want /query/STORE/KEY");
        }
        String store = decode(raw.substring(0, slash));
        String key = decode(raw.substring(slash + 1));
        if (!store.equals(STORE)) {
            return error(404, "no such store: \"" + store + "\" (the application's stores: [" + STORE + "])");
        }
        Map<String, String> q = params(ex.getRequestURI().getRawQuery());
        long maxLag = -1;
        long minOffset = 0;
        long timeoutMs = 5000;
        boolean local = "true".equals(q.get("local"));
        try {
            if (q.containsKey("max-lag")) {
                maxLag = Long.parseLong(q.get("max-lag"));
            }
            if (q.containsKey("min-offset")) {
                minOffset = Long.parseLong(q.get("min-offset"));
            }
            if (q.containsKey("timeout")) {
                String t = q.get("timeout");
                timeoutMs = t.endsWith("ms") ? Long.parseLong(t.substring(0, t.length() - 2))
                        : Duration.parse("PT" + t.toUpperCase()).toMillis();
            }
        } catch (RuntimeException e) {
            return error(400, "bad query: " + Main.oneLine(e));
        }
        if (maxLag < -1 || minOffset < 0 || timeoutMs <= 0) {
            return error(400, "bad query: max-lag, min-offset and timeout must not be negative");
        }
        long deadline = System.nanoTime() + timeoutMs * 1_000_000;
        long[] lowest = {-1};
        while (true) {
            String a = local(key, maxLag, minOffset, lowest);
            if (a == null && !local) {
                a = remote(key, maxLag, minOffset);
            }
            if (a != null) {
                return new Reply(200, a);
            }
            if (local || System.nanoTime() > deadline) {
                return error(503, "store " + STORE + ": no copy met the bounds within " + timeoutMs
                        + " ms; the lowest lag seen was " + lowest[0]);
            }
            try {
                Thread.sleep(25);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return error(503, "interrupted");
            }
        }
    }

    /** This instance's answer, or null when its copy does not meet the bounds. */
    private String local(String key, long maxLag, long minOffset, long[] lowest) {
        try {
            KeyQueryMetadata md = streams.queryMetadataForKey(STORE, key, keys);
            if (md == null || md == KeyQueryMetadata.NOT_AVAILABLE) {
                return null;
            }
            int p = md.partition();
            boolean active = self.equals(md.activeHost());
            if (!active && !(maxLag >= 0 && md.standbyHosts().contains(self))) {
                return null;
            }
            LagInfo li = lags.get(p);
            if (li == null) {
                return null;
            }
            long lag = li.offsetLag();
            if (lowest[0] < 0 || lag < lowest[0]) {
                lowest[0] = lag;
            }
            if ((maxLag >= 0 && lag > maxLag) || li.currentOffsetPosition() < minOffset) {
                return null;
            }
            StoreQueryParameters<ReadOnlyKeyValueStore<String, Long>> params = StoreQueryParameters
                    .fromNameAndType(STORE, QueryableStoreTypes.<String, Long>keyValueStore()).withPartition(p);
            if (maxLag >= 0) {
                params = params.enableStaleStores();
            }
            Long v = streams.store(params).get(key);
            StringBuilder b = new StringBuilder(160);
            b.append("{\"store\":\"").append(STORE).append("\",\"key\":");
            Json.string(b, key);
            b.append(",\"found\":").append(v != null);
            if (v != null) {
                b.append(",\"value\":\"").append(v).append('"');
            }
            b.append(",\"task\":\"1_").append(p).append("\",\"instance\":");
            Json.string(b, instance);
            b.append(",\"role\":\"").append(active ? "active" : "standby").append('"');
            b.append(",\"lag\":").append(active && maxLag < 0 ? 0 : lag);
            b.append(",\"offset\":").append(li.currentOffsetPosition()).append('}');
            return b.toString();
        } catch (InvalidStateStoreException e) {
            return null; // rebalancing, restoring, or moved away
        }
    }

    /** Another instance's answer (active first, then standbys), or null. */
    private String remote(String key, long maxLag, long minOffset) {
        KeyQueryMetadata md;
        try {
            md = streams.queryMetadataForKey(STORE, key, keys);
        } catch (RuntimeException e) {
            return null;
        }
        if (md == null || md == KeyQueryMetadata.NOT_AVAILABLE) {
            return null;
        }
        List<HostInfo> hosts = new ArrayList<>();
        hosts.add(md.activeHost());
        if (maxLag >= 0) {
            hosts.addAll(md.standbyHosts());
        }
        for (HostInfo h : hosts) {
            if (h == null || h.equals(self)) {
                continue;
            }
            String query = "local=true&min-offset=" + minOffset + (maxLag >= 0 ? "&max-lag=" + maxLag : "");
            URI uri = URI.create("http://" + h.host() + ":" + h.port() + "/query/" + STORE + "/"
                    + URLEncoder.encode(key, StandardCharsets.UTF_8).replace("+", "%20") + "?" + query);
            try {
                HttpResponse<String> resp = client.send(HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(2)).GET().build(),
                        HttpResponse.BodyHandlers.ofString());
                if (resp.statusCode() == 200) {
                    return resp.body();
                }
            } catch (IOException e) {
                // not reachable: the next host, or the next look
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return null;
            }
        }
        return null;
    }

    private static Reply error(int code, String msg) {
        StringBuilder b = new StringBuilder("{\"error\":");
        Json.string(b, msg);
        return new Reply(code, b.append('}').toString());
    }

    private static String decode(String s) {
        return URLDecoder.decode(s.replace("+", "%2B"), StandardCharsets.UTF_8);
    }

    private static Map<String, String> params(String raw) {
        Map<String, String> out = new HashMap<>();
        if (raw == null) {
            return out;
        }
        for (String kv : raw.split("&")) {
            int eq = kv.indexOf('=');
            if (eq > 0) {
                out.put(decode(kv.substring(0, eq)), decode(kv.substring(eq + 1)));
            }
        }
        return out;
    }
}
