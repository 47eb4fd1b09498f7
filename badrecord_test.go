package baton

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/kafkatest"
	"github.com/baton-streams/baton/topology"
)

// doubler reads decimal numbers and writes them doubled: a record that is
// not a number fails to decode.
func doubler(t *testing.T, tg *kafkatest.Target) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder(tg.Name("dbl"))
	s := topology.FromTopic(b, tg.Name("nums"), topology.String, topology.Int64)
	topology.MapValues(s, func(v int64) int64 { return 2 * v }).To(tg.Name("doubled"))
	top, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return top
}

func TestBadRecords(t *testing.T) {
	for _, c := range []struct {
		name   string
		policy func(tg *kafkatest.Target) BadRecordPolicy
	}{
		{"stop", func(*kafkatest.Target) BadRecordPolicy { return StopOnBadRecord }},
		{"skip", func(*kafkatest.Target) BadRecordPolicy { return SkipBadRecords }},
		{"dead-letter", func(tg *kafkatest.Target) BadRecordPolicy { return DeadLetter(tg.Name("bad")) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			tg := kafkatest.ForTest(t)
			client, err := kgo.NewClient(kgo.SeedBrokers(tg.Brokers...))
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			nums, doubled, bad := tg.Name("nums"), tg.Name("doubled"), tg.Name("bad")
			for _, topic := range []string{nums, doubled, bad} {
				tg.CreateTopic(t, topic, 1, false)
			}
			for _, v := range []string{"1", "2", "abc", "3"} {
				if err := client.ProduceSync(context.Background(), &kgo.Record{Topic: nums, Value: []byte(v)}).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			reg := prometheus.NewRegistry()
			policy := c.policy(tg)
			app, err := New(doubler(t, tg), WithBrokers(tg.Brokers...), WithAppID(tg.Name("dbl")), WithBadRecords(policy),
				WithMetrics(reg), WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := goRun(t, ctx, app)

			if c.name == "stop" {
				select {
				case err := <-done:
					if !errors.Is(err, topology.ErrDecode) || !strings.Contains(err.Error(), nums+"[0]@2") {
						t.Errorf("err = %v, want a decode error naming %s[0]@2", err, nums)
					}
				case <-time.After(20 * time.Second):
					t.Fatal("a bad record did not stop the App")
				}
				return
			}
			want := "[2 4 6]"
			if got := readValues(t, tg.Brokers, doubled, 3); fmt.Sprint(got) != want {
				t.Errorf("doubled = %v, want %s", got, want)
			}
			var m dto.Metric
			if err := app.e.Metrics().BadRecords.WithLabelValues("0_0").Write(&m); err != nil {
				t.Fatal(err)
			}
			if n := m.GetCounter().GetValue(); n != 1 {
				t.Errorf("baton_bad_records_total = %v, want 1", n)
			}
			if c.name == "dead-letter" {
				if got := readValues(t, tg.Brokers, bad, 1); fmt.Sprint(got) != "[abc]" {
					t.Errorf("dead letters = %v, want [abc]", got)
				}
			}
			cancel()
			app.Leave()
			if err := <-done; err != nil {
				t.Error(err)
			}
		})
	}
}

func readValues(t *testing.T, brokers []string, topic string, n int) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []string
	for len(out) < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	return out
}
