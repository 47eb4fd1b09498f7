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

// checker passes numbers through three Processor-API nodes: "check"
// fails 13, "strict" fails 42, and "double" panics on 7 and doubles the
// rest.
func checker(t *testing.T, tg *kafkatest.Target) *topology.Topology {
	t.Helper()
	b := topology.NewBuilder(tg.Name("chk"))
	b.AddSource("in", tg.Name("nums"))
	failOn := func(bad string) topology.ProcessorFunc {
		return func(ctx topology.NodeContext, rec topology.Record) error {
			if string(rec.Value) == bad {
				return fmt.Errorf("%s is not allowed", bad)
			}
			return ctx.Forward(rec)
		}
	}
	b.AddProcessor("check", failOn("13"), "in")
	b.AddProcessor("strict", failOn("42"), "check")
	b.AddProcessor("double", topology.ProcessorFunc(func(ctx topology.NodeContext, rec topology.Record) error {
		if string(rec.Value) == "7" {
			panic("seven")
		}
		rec.Value = append(rec.Value, rec.Value...)
		return ctx.Forward(rec)
	}), "strict")
	b.AddSink("out", tg.Name("out"), "double")
	top, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return top
}

// TestProcessingErrors: the processing-error policy, under both
// guarantees. Stopping (the default) names the node and the record;
// skipping goes on past an error and a panic and counts them by node;
// dead letters carry the record, the error and the node; a processor's
// own policy overrides the application's, and a policy for a node the
// topology lacks is refused.
func TestProcessingErrors(t *testing.T) {
	for _, g := range guarantees {
		for _, c := range []struct {
			name string
			opts func(tg *kafkatest.Target) []Option
			// out is what reaches the output; stop, the error that ends
			// the App (empty: it runs on).
			out  string
			stop []string
		}{
			{"stop", func(*kafkatest.Target) []Option { return nil }, "", []string{`node "check"`, "13 is not allowed", "@1"}},
			{"skip", func(*kafkatest.Target) []Option { return []Option{WithProcessingErrors(SkipOnError)} }, "[11 22 33 55]", nil},
			{"dead-letter", func(tg *kafkatest.Target) []Option {
				return []Option{WithProcessingErrors(DeadLetter(tg.Name("dead")))}
			}, "[11 22 33 55]", nil},
			{"per-processor", func(*kafkatest.Target) []Option {
				return []Option{WithProcessingErrors(SkipOnError), WithProcessorErrors("strict", StopOnError)}
			}, "", []string{`node "strict"`, "42 is not allowed", "@4"}},
		} {
			t.Run(g.String()+"/"+c.name, func(t *testing.T) {
				tg := kafkatest.ForTest(t)
				nums, out, dead := tg.Name("nums"), tg.Name("out"), tg.Name("dead")
				for _, topic := range []string{nums, out, dead} {
					tg.CreateTopic(t, topic, 1, false)
				}
				client, err := kgo.NewClient(kgo.SeedBrokers(tg.Brokers...))
				if err != nil {
					t.Fatal(err)
				}
				defer client.Close()
				for _, v := range []string{"1", "13", "2", "7", "42", "3", "5"} {
					if err := client.ProduceSync(context.Background(), &kgo.Record{Topic: nums, Value: []byte(v)}).FirstErr(); err != nil {
						t.Fatal(err)
					}
				}
				if c.name == "per-processor" {
					c.out = "" // it stops at 42: what came before is not checked
				}
				reg := prometheus.NewRegistry()
				opts := append([]Option{WithBrokers(tg.Brokers...), WithAppID(tg.Name("chk")), WithGuarantee(g),
					WithMetrics(reg), WithLogger(slog.New(slog.DiscardHandler))}, c.opts(tg)...)
				app, err := New(checker(t, tg), opts...)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				done := goRun(t, ctx, app)
				if c.stop != nil {
					select {
					case err := <-done:
						for _, want := range c.stop {
							if err == nil || !strings.Contains(err.Error(), want) {
								t.Errorf("the App stopped with %v; want an error with %q", err, want)
							}
						}
					case <-time.After(30 * time.Second):
						t.Fatal("a failed record did not stop the App")
					}
					return
				}
				if got := readValues(t, tg.Brokers, out, 4); fmt.Sprint(got) != c.out {
					t.Errorf("output = %v, want %s", got, c.out)
				}
				for node, want := range map[string]float64{"check": 1, "strict": 1, "": 1} {
					var m dto.Metric
					if err := app.e.Metrics().ProcessingErrors.WithLabelValues("0_0", node).Write(&m); err != nil {
						t.Fatal(err)
					}
					if n := m.GetCounter().GetValue(); n != want {
						t.Errorf("baton_processing_errors_total{processor=%q} = %v, want %v", node, n, want)
					}
				}
				if c.name == "dead-letter" {
					letters := readRecords(t, tg.Brokers, dead, 3)
					var got []string
					for _, r := range letters {
						h := map[string]string{}
						for _, x := range r.Headers {
							h[x.Key] = string(x.Value)
						}
						got = append(got, fmt.Sprintf("%s:%s:%s:%s", r.Value, h["baton.processor"], h["baton.source.offset"], h["baton.task"]))
						if !strings.Contains(h["baton.error"], "allowed") && !strings.Contains(h["baton.error"], "panicked: seven") {
							t.Errorf("dead letter %s: baton.error %q", r.Value, h["baton.error"])
						}
					}
					if want := "[13:check:1:0_0 7::3:0_0 42:strict:4:0_0]"; fmt.Sprint(got) != want {
						t.Errorf("dead letters (value:processor:offset:task) = %v, want %s", got, want)
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
}

// TestProcessorErrorsUnknownNode: a policy for a processor the topology
// does not have is refused by New, naming it and the ones it has.
func TestProcessorErrorsUnknownNode(t *testing.T) {
	tg := kafkatest.ForTest(t)
	_, err := New(checker(t, tg), WithBrokers(tg.Brokers...), WithProcessorErrors("chek", SkipOnError))
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), `"chek"`) || !strings.Contains(err.Error(), "check, double, strict") {
		t.Errorf("err = %v, want ErrConfig naming chek and the processors check, double, strict", err)
	}
}

func readRecords(t *testing.T, brokers []string, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}
