package query

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// DefaultLimit and MaxLimit bound the entries of a range read.
const (
	DefaultLimit = 1000
	MaxLimit     = 100_000
)

// Entry is one key and its value in a range read; Task is the task whose
// store holds it. In a window read Key is the record key and WindowStart
// the window's start.
type Entry struct {
	Key, Value  []byte
	Task        string
	WindowStart time.Time
}

// RangeAnswer is a range read's result: its entries in key order, and per
// task read the copy that answered.
type RangeAnswer struct {
	Store   string
	Entries []Entry
	// Tasks are the answering copies (their Entries are in Entries).
	Tasks []Answer
	// Truncated: some task had more entries in the range than the limit,
	// or all of them together had; Entries holds the first Limit.
	Truncated bool
	// Window is the record key of a window read (Windows), nil for a range.
	Window []byte
}

// check names the first bound that is not valid (ErrBadRequest).
func (b Bounds) check() error {
	switch {
	case b.MinOffset < 0:
		return fmt.Errorf("%w: MinOffset %d: want 0 or more", ErrBadRequest, b.MinOffset)
	case b.Timeout < 0 || b.Timeout > MaxTimeout:
		return fmt.Errorf("%w: timeout %v: want at most %v", ErrBadRequest, b.Timeout, MaxTimeout)
	case b.Limit < 0 || b.Limit > MaxLimit:
		return fmt.Errorf("%w: limit %d: want 1 to %d", ErrBadRequest, b.Limit, MaxLimit)
	}
	for t, o := range b.MinOffsets {
		if o < 0 {
			return fmt.Errorf("%w: MinOffsets[%s] %d: want 0 or more", ErrBadRequest, t, o)
		}
	}
	return nil
}

func (b Bounds) withDefaults() Bounds {
	if b.Timeout <= 0 {
		b.Timeout = DefaultTimeout
	}
	if b.Limit <= 0 {
		b.Limit = DefaultLimit
	}
	return b
}

// Range reads the keys in [from, to) (nil: unbounded) of store through a
// copy of each of its tasks that meets b (b.MinOffsets per task), the
// first b.Limit in key order; task, when set, reads that task only. It
// waits for each task as Get does, and fails with the first task that no
// copy answered.
func (r *Router) Range(ctx context.Context, store string, from, to []byte, b Bounds, here bool, task string) (_ RangeAnswer, err error) {
	start := time.Now()
	defer func() { r.asked("range", here, start, err) }()
	if err := b.check(); err != nil {
		return RangeAnswer{}, err
	}
	if err := r.src.Reads(store, "range"); err != nil {
		return RangeAnswer{}, err
	}
	b = b.withDefaults()
	var tasks []string
	err = whenKnown(ctx, b, here, func() (err error) {
		tasks, err = r.src.Tasks(store)
		return err
	})
	if err != nil {
		return RangeAnswer{}, err
	}
	if task != "" {
		if !slices.Contains(tasks, task) {
			return RangeAnswer{}, fmt.Errorf("%w: task=%q: store %s's tasks are %v", ErrBadRequest, task, store, tasks)
		}
		tasks = []string{task}
	}
	answers := make([]Answer, len(tasks))
	errs := make([]error, len(tasks))
	var wg sync.WaitGroup
	for i, t := range tasks {
		wg.Go(func() {
			answers[i], errs[i] = r.serve(ctx, start, store, t, b, here, op{
				local: func() (Copy, bool, error) { return r.src.ReadRange(t, store, from, to, b.Limit) },
				remote: func(ctx context.Context, endpoint string, rb Bounds) (Answer, error) {
					ra, err := AskRange(ctx, r.client, endpoint, store, from, to, t, rb, true)
					if err != nil {
						return Answer{}, err
					}
					if len(ra.Tasks) != 1 {
						return Answer{}, fmt.Errorf("%s: range read of task %s answered for %d tasks", endpoint, t, len(ra.Tasks))
					}
					a := ra.Tasks[0]
					a.Entries, a.Truncated = ra.Entries, ra.Truncated
					return a, nil
				},
			})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return RangeAnswer{}, err
	}
	out := RangeAnswer{Store: store}
	for _, a := range answers {
		out.Truncated = out.Truncated || a.Truncated
		for _, e := range a.Entries {
			e.Task = a.Task
			out.Entries = append(out.Entries, e)
		}
		a.Entries, a.Truncated = nil, false
		out.Tasks = append(out.Tasks, a)
	}
	slices.SortFunc(out.Entries, func(x, y Entry) int { return bytes.Compare(x.Key, y.Key) })
	if len(out.Entries) > b.Limit {
		out.Entries, out.Truncated = out.Entries[:b.Limit], true
	}
	return out, nil
}

// Windows reads the windows of key starting in [from, to) from a
// windowed store: one task holds them all (the one key's records go to),
// read as Get reads a key, the first b.Limit windows in start order.
func (r *Router) Windows(ctx context.Context, store string, key []byte, from, to time.Time, b Bounds, here bool) (_ RangeAnswer, err error) {
	start := time.Now()
	defer func() { r.asked("window", here, start, err) }()
	if err := b.check(); err != nil {
		return RangeAnswer{}, err
	}
	if err := r.src.Reads(store, "window"); err != nil {
		return RangeAnswer{}, err
	}
	b = b.withDefaults()
	task, err := r.taskOf(ctx, store, key, b, here)
	if err != nil {
		return RangeAnswer{}, err
	}
	a, err := r.serve(ctx, start, store, task, b, here, op{
		local: func() (Copy, bool, error) { return r.src.ReadWindows(task, store, key, from, to, b.Limit) },
		remote: func(ctx context.Context, endpoint string, rb Bounds) (Answer, error) {
			ra, err := AskWindows(ctx, r.client, endpoint, store, key, from, to, rb, true)
			if err != nil {
				return Answer{}, err
			}
			if len(ra.Tasks) != 1 {
				return Answer{}, fmt.Errorf("%s: window read of task %s answered for %d tasks", endpoint, task, len(ra.Tasks))
			}
			a := ra.Tasks[0]
			a.Entries, a.Truncated = ra.Entries, ra.Truncated
			return a, nil
		},
	})
	if err != nil {
		return RangeAnswer{}, err
	}
	out := RangeAnswer{Store: store, Entries: a.Entries, Truncated: a.Truncated, Window: key}
	for i := range out.Entries {
		out.Entries[i].Task = task
	}
	a.Entries, a.Truncated = nil, false
	out.Tasks = []Answer{a}
	return out, nil
}
