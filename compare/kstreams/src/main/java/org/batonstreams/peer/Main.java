package org.batonstreams.peer;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.TopologyDescription;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.state.HostInfo;

/**
 * The Kafka Streams peer of {@code baton bench versus}: the wordcount of
 * {@code baton run wordcount} on Kafka Streams' DSL, one instance per process,
 * keeping the contract of compare/README.md.
 */
public final class Main {
    static final String ENGINE = "kstreams";

    /** Exit code the shutdown hook ends the JVM with (0 after SIGTERM/SIGINT). */
    private static volatile int exitCode = 0;

    public static void main(String[] args) {
        Flags f;
        try {
            f = Flags.parse(args);
        } catch (Flags.Bad e) {
            System.err.println(ENGINE + ": " + e.getMessage());
            System.exit(2);
            return;
        }
        try {
            run(f);
        } catch (Fatal e) {
            System.err.println(ENGINE + ": " + e.getMessage());
            System.exit(1);
        }
    }

    /** A start-up error reported as one line on stderr. */
    static final class Fatal extends Exception {
        Fatal(String msg) {
            super(msg);
        }
    }

    static void run(Flags f) throws Fatal {
        AtomicLong processed = new AtomicLong();
        Topology topology = Wordcount.build(f.input, f.output, processed);
        Map<Integer, String> subtopologyIds = taskIdMapping(topology, f.input);

        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, f.appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, f.brokers);
        p.put(StreamsConfig.CLIENT_ID_CONFIG, f.instance);
        p.put(StreamsConfig.STATE_DIR_CONFIG, f.stateDir);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG,
                f.exactlyOnce ? StreamsConfig.EXACTLY_ONCE_V2 : StreamsConfig.AT_LEAST_ONCE);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, Integer.toString(f.threads));
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, f.groupProtocol);
        if (f.commitIntervalMs != null) {
            p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, f.commitIntervalMs.toString());
        }
        if (f.httpPort > 0) {
            // Interactive queries: every instance names its endpoint to the
            // group, as baton's --http does.
            p.put(StreamsConfig.APPLICATION_SERVER_CONFIG, f.httpHost + ":" + f.httpPort);
        }
        boolean streamsProtocol = f.groupProtocol.equals("streams");
        if (!streamsProtocol) {
            // Under the classic protocol the assignment is computed by the
            // group leader's Kafka Streams from these client settings.
            p.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, Integer.toString(f.standbys));
            if (f.acceptableLag != null) {
                p.put(StreamsConfig.ACCEPTABLE_RECOVERY_LAG_CONFIG, f.acceptableLag.toString());
            }
            if (f.maxWarmups != null) {
                p.put(StreamsConfig.MAX_WARMUP_REPLICAS_CONFIG, f.maxWarmups.toString());
            }
            if (f.probingIntervalMs != null) {
                p.put(StreamsConfig.PROBING_REBALANCE_INTERVAL_MS_CONFIG, f.probingIntervalMs.toString());
            }
        }

        checkBrokers(f, streamsProtocol);

        KafkaStreams streams;
        try {
            streams = new KafkaStreams(topology, p);
        } catch (RuntimeException e) {
            // For one, a --state-dir that another instance holds.
            throw new Fatal("--state-dir " + f.stateDir + ": " + oneLine(e));
        }

        String processId = processId(f);

        // Kafka Streams calls the global restore listener for the stores
        // of active tasks only (standby and warm-up replicas report to
        // the StandbyUpdateListener): the contract's restored.
        AtomicLong restored = new AtomicLong();
        RestoreClock restoring = new RestoreClock();
        streams.setGlobalStateRestoreListener(new StateRestoreListener() {
            @Override
            public void onRestoreStart(TopicPartition tp, String store, long start, long end) {
                restoring.start(tp, store);
            }

            @Override
            public void onBatchRestored(TopicPartition tp, String store, long batchEnd, long n) {
                restored.addAndGet(n);
            }

            @Override
            public void onRestoreEnd(TopicPartition tp, String store, long total) {
                restoring.end(tp, store);
            }

            @Override
            public void onRestoreSuspended(TopicPartition tp, String store, long total) {
                restoring.end(tp, store);
            }
        });

        Object closing = new Object();
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.ERROR) {
                System.err.println(ENGINE + ": instance " + f.instance + " is in state ERROR, stopping");
                exitCode = 1;
                // Not from the stream thread that reported the error.
                new Thread(() -> System.exit(1), "exit-on-error").start();
            }
        });

        ScheduledExecutorService ticker = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "status");
            t.setDaemon(true);
            return t;
        });

        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            synchronized (closing) {
                streams.close(CloseOptions
                        .groupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP)
                        .withTimeout(Duration.ofSeconds(60)));
                ticker.shutdownNow();
                System.out.flush();
                System.err.flush();
                // The JVM would exit 143 after SIGTERM; the contract wants 0.
                Runtime.getRuntime().halt(exitCode);
            }
        }, "shutdown"));

        streams.start();
        if (f.httpPort > 0) {
            try {
                Queries.serve(streams, f.instance, new HostInfo(f.httpHost, f.httpPort));
            } catch (IOException e) {
                throw new Fatal("--http " + f.httpHost + ":" + f.httpPort + ": " + oneLine(e));
            }
        }
        ticker.scheduleAtFixedRate(() -> {
            try {
                System.out.println(status(f.instance, processId, streams, subtopologyIds, processed.get(),
                        restored.get(), restoring.elapsedMs(), f.standbys == 0));
            } catch (RuntimeException e) {
                System.err.println(ENGINE + ": status: " + oneLine(e));
            }
        }, 0, 1, TimeUnit.SECONDS);
    }

    /**
     * Fails fast, naming the brokers, when none answers within 10 s; under
     * the streams protocol also sets the group's assignment configs, which
     * that protocol keeps on the broker rather than in the client.
     */
    static void checkBrokers(Flags f, boolean streamsProtocol) throws Fatal {
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, f.brokers);
        ap.put(AdminClientConfig.CLIENT_ID_CONFIG, f.instance + "-startup");
        ap.put(AdminClientConfig.RECONNECT_BACKOFF_MS_CONFIG, "1000");
        ap.put(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "1000");
        Admin admin = Admin.create(ap);
        try {
            try {
                admin.describeCluster(new DescribeClusterOptions().timeoutMs(10_000))
                        .clusterId().get(11, TimeUnit.SECONDS);
            } catch (TimeoutException | ExecutionException e) {
                throw new Fatal("brokers " + f.brokers + " unreachable for 10 s");
            }
            if (!streamsProtocol) {
                return;
            }
            List<AlterConfigOp> ops = new ArrayList<>();
            ops.add(set("streams.num.standby.replicas", Integer.toString(f.standbys)));
            if (f.acceptableLag != null) {
                ops.add(set("streams.acceptable.recovery.lag", f.acceptableLag.toString()));
            }
            if (f.maxWarmups != null) {
                ops.add(set("streams.num.warmup.replicas", f.maxWarmups.toString()));
            }
            ConfigResource group = new ConfigResource(ConfigResource.Type.GROUP, f.appId);
            Map<ConfigResource, Collection<AlterConfigOp>> req = new HashMap<>();
            req.put(group, ops);
            try {
                admin.incrementalAlterConfigs(req).all().get(10, TimeUnit.SECONDS);
            } catch (TimeoutException | ExecutionException e) {
                throw new Fatal("--group-protocol streams: setting group " + f.appId + "'s configs: " + oneLine(e));
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Fatal("interrupted");
        } finally {
            // Not close(): it would wait up to a minute for calls in flight.
            admin.close(Duration.ofSeconds(1));
        }
    }

    private static AlterConfigOp set(String key, String value) {
        return new AlterConfigOp(new ConfigEntry(key, value), AlterConfigOp.OpType.SET);
    }

    /**
     * Maps Kafka Streams' subtopology numbers to the contract's: 0 reads the
     * input, 1 reads the repartition topic. Kafka Streams numbers them the
     * same way for this topology; this makes sure of it.
     */
    static Map<Integer, String> taskIdMapping(Topology topology, String input) {
        Map<Integer, String> m = new HashMap<>();
        for (TopologyDescription.Subtopology s : topology.describe().subtopologies()) {
            boolean readsInput = false;
            for (TopologyDescription.Node n : s.nodes()) {
                if (n instanceof TopologyDescription.Source src
                        && src.topicSet() != null && src.topicSet().contains(input)) {
                    readsInput = true;
                }
            }
            m.put(s.id(), readsInput ? "0" : "1");
        }
        return m;
    }

    /**
     * The process id Kafka Streams chose for this instance, read from the
     * file in which it keeps it across restarts (written when the
     * KafkaStreams object is built, for a topology with persistent stores);
     * "" when it cannot be read. Its assignor orders clients by it, so it
     * decides where the target assignment puts each task.
     */
    static String processId(Flags f) {
        Path file = Paths.get(f.stateDir, f.appId, "kafka-streams-process-metadata");
        try {
            Matcher m = PROCESS_ID.matcher(Files.readString(file));
            return m.find() ? m.group(1) : "";
        } catch (IOException e) {
            System.err.println(ENGINE + ": process id: " + oneLine(e));
            return "";
        }
    }

    private static final Pattern PROCESS_ID = Pattern.compile("\"processId\"\\s*:\\s*\"([0-9a-fA-F-]+)\"");

    /**
     * The wall time during which at least one store of an active task was
     * restoring (from the restore listener's start to its end or
     * suspension), overlapping restores counted once.
     */
    static final class RestoreClock {
        private final Set<String> pending = new HashSet<>();
        private long doneNanos;
        private long from;

        synchronized void start(TopicPartition tp, String store) {
            if (pending.isEmpty()) {
                from = System.nanoTime();
            }
            pending.add(store + "/" + tp);
        }

        synchronized void end(TopicPartition tp, String store) {
            if (pending.remove(store + "/" + tp) && pending.isEmpty()) {
                doneNanos += System.nanoTime() - from;
            }
        }

        synchronized long elapsedMs() {
            long d = doneNanos;
            if (!pending.isEmpty()) {
                d += System.nanoTime() - from;
            }
            return d / 1_000_000;
        }
    }

    static String status(String instance, String processId, KafkaStreams streams, Map<Integer, String> ids,
                         long processed, long restored, long restoreMs, boolean standbysAreWarmups) {
        TreeSet<String> active = new TreeSet<>();
        TreeSet<String> standby = new TreeSet<>();
        for (ThreadMetadata t : streams.metadataForLocalThreads()) {
            for (TaskMetadata tm : t.activeTasks()) {
                active.add(taskId(ids, tm));
            }
            for (TaskMetadata tm : t.standbyTasks()) {
                standby.add(taskId(ids, tm));
            }
        }
        // Kafka Streams hands warm-up replicas to its threads as standby
        // tasks. With no standby replicas configured every standby task is a
        // warm-up; otherwise the two cannot be told apart from the instance.
        TreeSet<String> warmup = new TreeSet<>();
        if (standbysAreWarmups) {
            warmup = standby;
            standby = new TreeSet<>();
        }
        StringBuilder b = new StringBuilder(160);
        b.append("{\"engine\":\"").append(ENGINE).append("\",\"instance\":");
        Json.string(b, instance);
        if (!processId.isEmpty()) {
            b.append(",\"process\":");
            Json.string(b, processId);
        }
        b.append(",\"time_ms\":").append(System.currentTimeMillis());
        b.append(",\"state\":");
        Json.string(b, streams.state().name());
        b.append(",\"active\":");
        Json.strings(b, active);
        b.append(",\"standby\":");
        Json.strings(b, standby);
        b.append(",\"warmup\":");
        Json.strings(b, warmup);
        b.append(",\"processed\":").append(processed);
        b.append(",\"restored\":").append(restored);
        b.append(",\"restore_ms\":").append(restoreMs).append('}');
        return b.toString();
    }

    private static String taskId(Map<Integer, String> ids, TaskMetadata tm) {
        String sub = ids.getOrDefault(tm.taskId().subtopology(), Integer.toString(tm.taskId().subtopology()));
        return sub + "_" + tm.taskId().partition();
    }

    static String oneLine(Throwable e) {
        Throwable c = e;
        while ((c instanceof ExecutionException || c.getMessage() == null) && c.getCause() != null) {
            c = c.getCause();
        }
        String msg = c.getMessage() == null ? c.getClass().getSimpleName() : c.getMessage();
        return msg.replace('\n', ' ');
    }

    private Main() {
    }
}
