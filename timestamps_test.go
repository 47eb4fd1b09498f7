package baton

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/counts"
)

// TestWritesCarryInputTimestamp: every record the wordcount writes (to the
// repartition topic, the changelog and the output) carries the timestamp of
// the input record it came from, so end-to-end latency can be read off the
// output.
func TestWritesCarryInputTimestamp(t *testing.T) {
	h := newHarness(t, 2)
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	want := map[string]time.Time{} // word -> timestamp of its line
	var recs []*kgo.Record
	for i := range 200 {
		w := fmt.Sprintf("w%03d", i)
		ts := base.Add(time.Duration(i) * time.Second)
		want[w] = ts
		h.words[w] = 2
		recs = append(recs, &kgo.Record{Topic: h.input, Key: []byte(w), Value: []byte(w + " " + w), Timestamp: ts})
	}
	if err := h.prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	h.start("a")
	h.waitExact(60 * time.Second)

	// The repartition topic is purged once committed; the counts read it,
	// so the output carries its timestamps only if it carries the input's.
	changelog, _ := h.internalTopics()
	for _, topic := range []string{changelog, h.output} {
		n := 0
		var bad []string
		scan := func() {
			n, bad = 0, nil
			err := counts.Scan(context.Background(), h.brokers, topic, true, func(r *kgo.Record) {
				n++
				if got := r.Timestamp; !got.Equal(want[string(r.Key)]) {
					bad = append(bad, fmt.Sprintf("%s: %s, want %s", r.Key, got.Format(time.RFC3339Nano), want[string(r.Key)].Format(time.RFC3339Nano)))
				}
			})
			if err != nil {
				t.Fatalf("reading %s: %v", topic, err)
			}
		}
		// The exact counts are in the output; the changelog's last
		// writes may still be on their way (acknowledged later than the
		// output's on Apache Kafka): read again until they are in.
		scan()
		for deadline := time.Now().Add(30 * time.Second); n < len(want) && time.Now().Before(deadline); scan() {
			time.Sleep(200 * time.Millisecond)
		}
		if n < len(want) {
			t.Errorf("%s: %d records, want at least %d", topic, n, len(want))
		}
		if len(bad) > 0 {
			t.Errorf("%s: %d of %d records do not carry their input's timestamp, e.g.\n%s", topic, len(bad), n, strings.Join(bad[:min(5, len(bad))], "\n"))
		}
	}
}
