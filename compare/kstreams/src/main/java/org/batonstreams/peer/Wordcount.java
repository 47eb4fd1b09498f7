package org.batonstreams.peer;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

/** The wordcount topology, in Kafka Streams' DSL with its defaults. */
final class Wordcount {
    /**
     * Builds input -> split into words -> repartition by word ("words") ->
     * count in the default persistent store "counts" -> output, the count as
     * decimal ASCII. Apart from the store's record cache (off, see below),
     * timestamps, partitioner and store are Kafka Streams'
     * defaults: outputs carry the input record's timestamp and go to the
     * partition murmur2 of the key picks.
     */
    static Topology build(String input, String output, AtomicLong processed) {
        StreamsBuilder b = new StreamsBuilder();
        b.stream(input, Consumed.with(Serdes.ByteArray(), Serdes.String()))
                .peek((k, v) -> processed.incrementAndGet())
                .flatMapValues(Wordcount::words)
                .groupBy((k, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
                // The contract wants one output record per word occurrence:
                // the store's record cache (on by default) would fold a
                // commit interval's updates of a word into one, so it is off.
                .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts")
                        .withCachingDisabled())
                .toStream()
                .mapValues(n -> Long.toString(n))
                .to(output, Produced.with(Serdes.String(), Serdes.String()));
        return b.build();
    }

    /**
     * The words of a line: its runs of non-white-space characters, white
     * space being what Go's unicode.IsSpace calls so (strings.Fields), as
     * in baton.
     */
    static List<String> words(String line) {
        List<String> out = new ArrayList<>();
        if (line == null) {
            return out;
        }
        int n = line.length();
        int start = -1;
        for (int i = 0; i < n; ) {
            int c = line.codePointAt(i);
            int next = i + Character.charCount(c);
            if (isSpace(c)) {
                if (start >= 0) {
                    out.add(line.substring(start, i));
                    start = -1;
                }
            } else if (start < 0) {
                start = i;
            }
            i = next;
        }
        if (start >= 0) {
            out.add(line.substring(start));
        }
        return out;
    }

    /** Go's unicode.IsSpace: Latin-1 \t \n \v \f \r, space, U+0085, U+00A0; else Unicode White_Space. */
    static boolean isSpace(int c) {
        switch (c) {
            case '\t', '\n', 0x0B, '\f', '\r', ' ', 0x85, 0xA0:
                return true;
            default:
                // White_Space beyond Latin-1 is exactly the Zs, Zl and Zp
                // characters (U+1680, U+2000..U+200A, U+2028, U+2029,
                // U+202F, U+205F, U+3000).
                return c > 0xFF && Character.isSpaceChar(c);
        }
    }

    private Wordcount() {
    }
}
