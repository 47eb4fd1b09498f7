import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * A read-process-write loop written with Apache Kafka's own clients, the
 * way a Kafka Streams task commits under exactly_once_v2: it reads IN
 * (read_committed) as the one member of GROUP, copies every record to the
 * same partition of OUT, and commits the copies and the input offsets in
 * one transaction per poll.
 *
 * <p>Usage: Split BOOTSTRAP IN OUT GROUP TRANSACTIONAL_ID [MAX_BLOCK_MS]. It
 * runs until its standard input closes. MAX_BLOCK_MS is the producer's
 * max.block.ms: how long a commit may wait before it is given up (Kafka's
 * default, 60000, when not given). A transaction that fails is aborted and the
 * input goes back to the group's committed offsets; a producer that cannot
 * go on (fenced, or its abort failed) is replaced by a new one with the
 * same transactional id. It prints one line per event on standard output:
 * "commits N" every 100 commits, "abort CAUSE", "new producer CAUSE".
 */
public final class Split {
    private final String bootstrap, out, txnId, maxBlockMs;
    private final KafkaConsumer<byte[], byte[]> consumer;
    private KafkaProducer<byte[], byte[]> producer;

    private Split(String bootstrap, String in, String out, String group, String txnId, String maxBlockMs) {
        this.maxBlockMs = maxBlockMs;
        this.bootstrap = bootstrap;
        this.out = out;
        this.txnId = txnId;
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "500");
        consumer = new KafkaConsumer<>(c, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        consumer.subscribe(Collections.singletonList(in));
        producer = newProducer();
    }

    private KafkaProducer<byte[], byte[]> newProducer() {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "10000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, maxBlockMs);
        while (true) {
            KafkaProducer<byte[], byte[]> pr = new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
            try {
                pr.initTransactions();
                return pr;
            } catch (KafkaException e) {
                // The coordinator may be out of reach for a while after a kill.
                System.out.println("new producer " + e);
                pr.close(Duration.ZERO);
            }
        }
    }

    private void run(Thread stdin) {
        long commits = 0;
        while (stdin.isAlive()) {
            ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(100));
            if (recs.isEmpty()) {
                continue;
            }
            try {
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    producer.send(new ProducerRecord<>(out, r.partition(), r.key(), r.value()));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                producer.commitTransaction();
                if (++commits % 100 == 0) {
                    System.out.println("commits " + commits);
                }
            } catch (KafkaException e) {
                System.out.println("abort " + e);
                try {
                    producer.abortTransaction();
                } catch (KafkaException | IllegalStateException e2) {
                    // IllegalStateException: the commit timed out, and the
                    // client allows only a retry of it. Giving the commit up
                    // as baton does takes a new producer: its
                    // initTransactions fences this one and has the
                    // coordinator abort what is still open.
                    System.out.println("new producer " + e2);
                    producer.close(Duration.ZERO);
                    producer = newProducer();
                }
                rewind();
            }
        }
        producer.close();
        consumer.close();
    }

    /** rewind moves every assigned partition back to its committed offset. */
    private void rewind() {
        Set<TopicPartition> assigned = consumer.assignment();
        Map<TopicPartition, OffsetAndMetadata> committed;
        while (true) {
            try {
                committed = consumer.committed(assigned, Duration.ofSeconds(60));
                break;
            } catch (KafkaException e) {
                System.out.println("rewind " + e);
            }
        }
        for (TopicPartition tp : assigned) {
            OffsetAndMetadata o = committed.get(tp);
            if (o == null) {
                consumer.seekToBeginning(Collections.singletonList(tp));
            } else {
                consumer.seek(tp, o.offset());
            }
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 5 && args.length != 6) {
            System.err.println("usage: Split BOOTSTRAP IN OUT GROUP TRANSACTIONAL_ID [MAX_BLOCK_MS]");
            System.exit(2);
        }
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                }
            } catch (java.io.IOException e) {
                // closed
            }
        });
        stdin.setDaemon(true);
        stdin.start();
        new Split(args[0], args[1], args[2], args[3], args[4], args.length == 6 ? args[5] : "60000").run(stdin);
    }
}
