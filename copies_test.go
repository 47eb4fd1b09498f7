package baton

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/baton-streams/baton/internal/work"
)

// storeCopy is a store as its task started processing on an instance:
// what its copy (a promoted standby or learner, or a restore from zero)
// held, and the changelog offset it held it at.
type storeCopy struct {
	instance, task, store, changelog string
	part                             int32
	checkpoint                       int64
	data                             map[string]string
	err                              error
}

// copyCheck collects the stores of every task that starts processing on
// the instances of a test that asked for it (harness.checkCopies).
type copyCheck struct {
	mu     sync.Mutex
	copies []storeCopy
}

// checkCopies is an Option that makes every task starting to process on
// the instance record its stores, record for record, before it processes
// anything. When the test ends, each is compared with its changelog up
// to the offset the store says it holds: a warm copy that missed a
// record, or holds one the changelog does not, fails the test. The
// changelogs must be whole (not truncated) for the comparison to hold.
func (h *harness) checkCopies() Option {
	if h.copies == nil {
		h.copies = &copyCheck{}
		h.t.Cleanup(h.compareCopies)
	}
	cc := h.copies
	return func(c *config) {
		inst := c.InstanceID
		c.OnStart = func(t *work.Task) {
			for _, name := range slices.Sorted(maps.Keys(t.Stores)) {
				s := t.Stores[name]
				sc := storeCopy{instance: inst, task: t.ID, store: name, changelog: s.Changelog, part: t.Part,
					checkpoint: s.Checkpoint, data: map[string]string{}}
				if s.Pending() > 0 || len(s.Sealed) > 0 {
					sc.err = fmt.Errorf("%d pending and %d sealed writes before it processed anything", s.Pending(), len(s.Sealed))
				}
				if err := s.State.Iterate(nil, nil, func(k, v []byte) error {
					sc.data[string(k)] = string(v)
					return nil
				}); err != nil && sc.err == nil {
					sc.err = err
				}
				cc.mu.Lock()
				cc.copies = append(cc.copies, sc)
				cc.mu.Unlock()
			}
		}
	}
}

// compareCopies compares every recorded copy with its changelog.
func (h *harness) compareCopies() {
	h.t.Helper()
	cc := h.copies
	cc.mu.Lock()
	copies := slices.Clone(cc.copies) // the changelogs are read without the lock
	cc.mu.Unlock()
	type at struct {
		topic string
		part  int32
		until int64
	}
	read := map[at]map[string]string{}
	for _, c := range copies {
		where := fmt.Sprintf("task %s store %s on %s (changelog %s[%d] before %d)", c.task, c.store, c.instance, c.changelog, c.part, c.checkpoint)
		if c.err != nil {
			h.t.Errorf("%s: %v", where, c.err)
			continue
		}
		k := at{c.changelog, c.part, c.checkpoint}
		want, ok := read[k]
		if !ok {
			var start int64
			want, start = h.changelogUntil(c.changelog, c.part, c.checkpoint)
			if start > 0 {
				h.t.Errorf("%s: the changelog starts at %d, so the copy cannot be compared with it", where, start)
				continue
			}
			read[k] = want
		}
		if diff := mapDiff(want, c.data); diff != "" {
			h.t.Errorf("%s differs from its changelog: %s", where, diff)
		}
	}
	h.t.Logf("compared %d stores, as their tasks started processing, with their changelogs", len(copies))
}

// mapDiff describes how got differs from want (at most five keys), or is
// empty when they are equal.
func mapDiff(want, got map[string]string) string {
	var d []string
	keys := slices.Sorted(maps.Keys(want))
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	n := 0
	for _, k := range keys {
		w, inWant := want[k]
		g, inGot := got[k]
		switch {
		case inWant && !inGot:
			d = append(d, fmt.Sprintf("%q missing (changelog: %q)", k, w))
		case !inWant && inGot:
			d = append(d, fmt.Sprintf("%q=%q not in the changelog", k, g))
		case w != g:
			d = append(d, fmt.Sprintf("%q=%q, changelog %q", k, g, w))
		default:
			continue
		}
		n++
	}
	if n == 0 {
		return ""
	}
	if len(d) > 5 {
		d = append(d[:5], fmt.Sprintf("and %d more", n-5))
	}
	return fmt.Sprintf("%d keys: %s", n, strings.Join(d, "; "))
}
