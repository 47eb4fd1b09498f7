import java.time.Duration;
import java.util.Collections;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * One transaction, written with Apache Kafka's own Java producer and no
 * other code, for TestJavaClientSplitRepro.
 *
 * <p>Usage:
 * <ul>
 * <li>{@code Repro begin BOOTSTRAP TOPIC PARTITIONS GROUP TRANSACTIONAL_ID}:
 * initTransactions, then one transaction holding a record in each of
 * partitions 0..PARTITIONS-1 of TOPIC and, as sendOffsetsToTransaction,
 * offset 1 of TOPIC[0] for GROUP (so __consumer_offsets is in it, as a
 * read-process-write commit); prints "committing" and calls
 * commitTransaction. The test kills this process with SIGKILL once the
 * coordinator has appended PrepareCommit, so that no client retries the
 * commit: a client that gave the commit up (a short max.block.ms) and
 * then started a new producer, as Kafka Streams or baton does.</li>
 * <li>{@code Repro init BOOTSTRAP TRANSACTIONAL_ID}: a new producer with the
 * same transactional id calls initTransactions, which fences the first
 * and has the coordinator end its pending transaction; prints
 * "initialized" and closes.</li>
 * </ul>
 */
public final class Repro {
    private static KafkaProducer<byte[], byte[]> producer(String bootstrap, String txnId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        // Long enough that no step of the test's one transaction times out
        // on a slow cluster: the coordinator, not the timeout, ends it.
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "300000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "240000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "60000");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "240000");
        return new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
    }

    private static void say(String s) {
        System.out.println(System.currentTimeMillis() + " " + s);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 6 && args[0].equals("begin")) {
            String topic = args[2];
            int partitions = Integer.parseInt(args[3]);
            KafkaProducer<byte[], byte[]> pr = producer(args[1], args[5]);
            pr.initTransactions();
            say("initialized");
            pr.beginTransaction();
            for (int p = 0; p < partitions; p++) {
                pr.send(new ProducerRecord<>(topic, p, null, ("r" + p).getBytes()));
            }
            pr.flush();
            say("sent");
            pr.sendOffsetsToTransaction(
                    Collections.singletonMap(new TopicPartition(topic, 0), new OffsetAndMetadata(1)),
                    new ConsumerGroupMetadata(args[4]));
            say("committing");
            pr.commitTransaction();
            say("committed");
            pr.close(Duration.ZERO);
            return;
        }
        if (args.length == 3 && args[0].equals("init")) {
            KafkaProducer<byte[], byte[]> pr = producer(args[1], args[2]);
            pr.initTransactions();
            say("initialized");
            pr.close(Duration.ofSeconds(5));
            return;
        }
        System.err.println("usage: Repro begin BOOTSTRAP TOPIC PARTITIONS GROUP TRANSACTIONAL_ID | Repro init BOOTSTRAP TRANSACTIONAL_ID");
        System.exit(2);
    }
}
