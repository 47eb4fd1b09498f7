package topology

import (
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Kafka's UtilsTest.testMurmur2 vectors.
func TestMurmur2KafkaVectors(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
	} {
		if got := int32(murmur2([]byte(c.in))); got != c.want {
			t.Errorf("murmur2(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

// Partition must place keys exactly where franz-go's default key
// partitioner (Kafka's) does.
func TestPartitionMatchesKgo(t *testing.T) {
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 0))
	kp := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	for i := range 20000 {
		key := make([]byte, rng.IntN(40)) // non-nil, so kgo hashes it
		for j := range key {
			key[j] = byte(rng.Uint32())
		}
		n := int32(1 + rng.IntN(300))
		if i%7 == 0 {
			n = 1 + rng.Int32N(1<<20)
		}
		want := int32(kp.Partition(&kgo.Record{Key: key}, int(n)))
		if got := Partition(key, n); got != want {
			t.Fatalf("seed %d: Partition(%x, %d) = %d, kgo says %d", seed, key, n, got, want)
		}
	}
}

func BenchmarkPartition(b *testing.B) {
	key := []byte("a-typical-word-key")
	for b.Loop() {
		Partition(key, 12)
	}
}
