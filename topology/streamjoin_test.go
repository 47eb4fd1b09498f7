package topology

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestJoinStreamsMatchesModel runs random pairs of streams, out of order
// and with late records, through a windowed stream-stream join and
// compares every pair sent (and its time), and the late count, with the
// definition applied record by record. Halfway, the task moves: a new
// processor goes on over the same stores.
func TestJoinStreamsMatchesModel(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 3))
		d, g := int64(rng.IntN(30)), int64(rng.IntN(20))
		b := NewBuilder("app")
		clicks := FromTopic(b, "clicks", String, String)
		buys := FromTopic(b, "buys", String, String)
		JoinStreams(clicks, buys, JoinWithin(time.Duration(d)*time.Millisecond).Grace(time.Duration(g)*time.Millisecond), "cb",
			func(_ string, c, p string) string { return c + "&" + p }).To("out")
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		subs := topo.Subtopologies()
		if len(subs) != 1 || len(subs[0].Stores) != 2 {
			t.Fatalf("want one subtopology with two stores: %v", topo)
		}
		sub := subs[0]
		ctx := newWinCtx()
		proc := sub.NewProcessor("0_0", 0)

		type rec struct {
			side    string
			key, v  string
			ts      int64
			ordinal int
		}
		var kept []rec // the model's non-late records
		var stream int64
		seen, late := false, 0
		var want []string
		base := int64(rng.IntN(100))
		n := 40 + rng.IntN(160)
		for i := range n {
			if i == n/2 {
				proc = sub.NewProcessor("0_0", 0)
			}
			base += int64(rng.IntN(6))
			ts := base - int64(rng.IntN(int(2*(d+g))+2))*int64(rng.IntN(2))
			side := []string{"clicks", "buys"}[rng.IntN(2)]
			r := rec{side: side, key: string(rune('a' + rng.IntN(3))), v: fmt.Sprint(i), ts: ts, ordinal: i}
			// The model.
			if seen && ts < stream-d-g {
				late++
			} else {
				if !seen || ts > stream {
					stream, seen = ts, true
				}
				var partners []rec
				for _, o := range kept {
					if o.side != side && o.key == r.key && o.ts >= ts-d && o.ts <= ts+d {
						partners = append(partners, o)
					}
				}
				sort.SliceStable(partners, func(i, j int) bool { return partners[i].ts < partners[j].ts })
				for _, o := range partners {
					c, p := r, o
					if side == "buys" {
						c, p = o, r
					}
					want = append(want, fmt.Sprintf("%s %s&%s at %d", r.key, c.v, p.v, max(r.ts, o.ts)))
				}
				kept = append(kept, r)
			}
			err := proc.Process(ctx, Record{Topic: side, Offset: int64(i), Key: []byte(r.key), Value: []byte(r.v), Timestamp: time.UnixMilli(ts)})
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
		}
		desc := fmt.Sprintf("seed %d (within %d, grace %d)", seed, d, g)
		var got []string
		for _, s := range ctx.sent {
			var k []byte
			var v string
			var at int64
			if _, err := fmt.Sscanf(s, "out %x=%s at %d", &k, &v, &at); err != nil {
				t.Fatalf("sent %q: %v", s, err)
			}
			got = append(got, fmt.Sprintf("%s %s at %d", k, v, at))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: pairs differ at %d:\n got %v\nwant %v", desc, firstDiff(got, want), got, want)
		}
		if l := ctx.late["cb-left"] + ctx.late["cb-right"]; l != late {
			t.Fatalf("%s: %d late records counted, want %d", desc, l, late)
		}
		// Nothing is kept that no later record could pair with, beyond
		// one sweep period.
		for _, name := range []string{"cb-left", "cb-right"} {
			ctx.stores[name].Iterate(nil, nil, func(k, _ []byte) error {
				if len(k) < 20 {
					return nil
				}
				at := int64(binary.BigEndian.Uint64(k[len(k)-16:]) ^ (1 << 63))
				if at < stream-3*d-2*g-1 {
					t.Errorf("%s: %s keeps a record of time %d at stream time %d", desc, name, at, stream)
				}
				return nil
			})
		}
	}
}

func TestJoinStreamsMistakes(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(b *Builder)
		want  string
	}{
		{"negative window", func(b *Builder) {
			JoinStreams(FromTopic(b, "a", String, String), FromTopic(b, "b", String, String), JoinWithin(-time.Second), "j",
				func(_, x, y string) string { return x + y }).To("out")
		}, `JoinStreams "j": join window -1s must be`},
		{"after Map", func(b *Builder) {
			a := Map(FromTopic(b, "a", String, String), func(k, v string) (string, string) { return v, k })
			JoinStreams(a, FromTopic(b, "b", String, String), JoinWithin(time.Second), "j",
				func(_, x, y string) string { return x + y }).To("out")
		}, `JoinStreams "j": a stream may have a new key (Map, FlatMap, SelectKey): Repartition it first`},
		{"no codecs", func(b *Builder) {
			a := MapValues(FromTopic(b, "a", String, String), func(v string) int { return len(v) })
			JoinStreams(a, FromTopic(b, "b", String, String), JoinWithin(time.Second), "j",
				func(_ string, x int, y string) string { return y }).To("out")
		}, `both streams need codecs`},
		{"store taken", func(b *Builder) {
			Count(GroupByKey(FromTopic(b, "c", String, String), "g"), "j-left")
			JoinStreams(FromTopic(b, "a", String, String), FromTopic(b, "b", String, String), JoinWithin(time.Second), "j",
				func(_, x, y string) string { return x + y }).To("out")
		}, `store "j-left" or "j-right" is already used`},
	} {
		b := NewBuilder("app")
		c.build(b)
		_, err := b.Build()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Build: %v\nwant it to say %q", c.name, err, c.want)
		}
	}
}
