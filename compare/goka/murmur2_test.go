package main

import "testing"

// Expected values computed with the Apache Kafka 4.4 Java client
// (org.apache.kafka.common.utils.Utils.murmur2 and toPositive(..) % n) on the
// UTF-8 bytes of each key.
var murmur2Cases = []struct {
	key  string
	hash int32
	p6   int32
	p7   int32
}{
	{"", 275646681, 3, 2},
	{"a", -1563381124, 4, 5},
	{"ab", 316155434, 2, 0},
	{"abc", 479470107, 3, 4},
	{"abcd", -1323649548, 2, 5},
	{"abcde", 461995741, 1, 4},
	{"21", -973932308, 0, 3},
	{"foobar", -790332482, 0, 0},
	{"a-little-bit-long-string", -985981536, 2, 1},
	{"a-little-bit-longer-string", -1486304829, 5, 0},
	{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971, 5, 3},
	{"hello", 2132663229, 3, 4},
	{"world", 24190312, 4, 6},
	{"Grüße", 1190824359, 3, 4},
	{"日本語", 1431860170, 4, 6},
	{"ü", 1419834458, 2, 0},
}

func TestMurmur2MatchesKafka(t *testing.T) {
	for _, c := range murmur2Cases {
		if got := int32(murmur2([]byte(c.key))); got != c.hash {
			t.Errorf("murmur2(%q) = %d, want %d", c.key, got, c.hash)
		}
		if got := kafkaPartition([]byte(c.key), 6); got != c.p6 {
			t.Errorf("partition(%q, 6) = %d, want %d", c.key, got, c.p6)
		}
		if got := kafkaPartition([]byte(c.key), 7); got != c.p7 {
			t.Errorf("partition(%q, 7) = %d, want %d", c.key, got, c.p7)
		}
	}
}

// The hasher goka and sarama use must give Kafka's partition through both of
// their formulas: sarama's NewCustomHashPartitioner and goka's Processor.hash.
func TestHasherPartitionsLikeKafka(t *testing.T) {
	for _, c := range murmur2Cases {
		h := newMurmur2Hasher()
		h.Write([]byte(c.key))
		sum := int32(h.Sum32())
		for _, n := range []int32{6, 7} {
			want := kafkaPartition([]byte(c.key), n)
			sarama := sum % n
			if sarama < 0 {
				sarama = -sarama
			}
			abs := sum
			if abs < 0 {
				abs = -abs
			}
			if sarama != want || abs%n != want {
				t.Errorf("%q over %d partitions: sarama %d, goka %d, want %d", c.key, n, sarama, abs%n, want)
			}
		}
		h.Reset()
		h.Write([]byte(c.key[:len(c.key)/2]))
		h.Write([]byte(c.key[len(c.key)/2:]))
		if int32(h.Sum32()) != sum {
			t.Errorf("%q: hash after Reset and split writes differs", c.key)
		}
	}
}
