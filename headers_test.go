package baton

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/kafkatest"
	"github.com/baton-streams/baton/topology"
)

// TestHeadersEndToEnd: an input record's headers reach the records
// derived from it, through a repartition topic and an aggregation, with
// what SetHeaders adds; under both guarantees.
func TestHeadersEndToEnd(t *testing.T) {
	for _, g := range guarantees {
		t.Run(g.String(), func(t *testing.T) {
			tg := kafkatest.ForTest(t)
			lines, out := tg.Name("lines"), tg.Name("counts")
			tg.CreateTopic(t, lines, 2, false)
			tg.CreateTopic(t, out, 2, false)
			b := topology.NewBuilder(tg.Name("hdr"))
			words := topology.FlatMapValues(topology.FromTopic(b, lines, topology.String, topology.String), strings.Fields)
			stamped := topology.SetHeaders(words, func(_ string, w string, h topology.Headers) topology.Headers {
				return h.With("word", []byte(w))
			})
			topology.Count(topology.GroupBy(stamped, func(_, w string) string { return w }, topology.String, "by-word"), "counts").ToTopic(out)
			top, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			client, err := kgo.NewClient(kgo.SeedBrokers(tg.Brokers...))
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			for i, l := range []string{"red green", "red"} {
				r := &kgo.Record{Topic: lines, Value: []byte(l), Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte(fmt.Sprint("t", i))}}}
				if err := client.ProduceSync(context.Background(), r).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			app, err := New(top, WithBrokers(tg.Brokers...), WithGuarantee(g), WithStateDir(t.TempDir()), WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := goRun(t, ctx, app)
			var got []string
			for _, r := range readRecords(t, tg.Brokers, out, 3) {
				h := map[string]string{}
				for _, x := range r.Headers {
					h[x.Key] = string(x.Value)
				}
				got = append(got, fmt.Sprintf("%s=%s trace:%s word:%s", r.Key, r.Value, h["trace"], h["word"]))
			}
			slices.Sort(got)
			if want := []string{"green=1 trace:t0 word:green", "red=1 trace:t0 word:red", "red=2 trace:t1 word:red"}; !slices.Equal(got, want) {
				t.Errorf("counts with their headers:\n%q\nwant\n%q", got, want)
			}
			cancel()
			app.Leave()
			if err := <-done; err != nil {
				t.Error(err)
			}
		})
	}
}
