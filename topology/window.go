package topology

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Windows says how a windowed aggregation groups records by event time
// (Record.Timestamp, after the TimestampExtractor). Make them with
// TumblingWindows or HoppingWindows, then set a grace period and a
// retention.
//
// Windows are aligned to the Unix epoch: a window of size S advancing by
// A starts at a multiple of A and holds the records whose event time t
// has start <= t < start+S. A tumbling window advances by its size, so
// every record falls into exactly one; a hopping window advances by less,
// so a record falls into S/A of them (rounded up).
//
// The grace period bounds how late a record may be. Each windowed store
// keeps its stream time: the largest event time it has been given. A
// window is closed once its end plus the grace period is at or before the
// stream time; a record is not added to a closed window. A record all of
// whose windows are closed is late: it is dropped, and counted in the
// runtime's baton_late_records_total metric. With hopping windows a
// record may be added to its newer windows and dropped from older ones;
// it is then not counted as late.
//
// Retention is how long a window stays in the store after it starts,
// measured in stream time: a window whose start is more than the
// retention before the stream time is deleted (a tombstone in its
// changelog, which is compacted). It must be at least size plus grace,
// which is its default, so that no window is deleted before it closes.
type Windows struct {
	size, advance, grace, retention time.Duration
	err                             error
}

// TumblingWindows returns windows of the given size that do not overlap:
// each record falls into one. The grace period is 0 until set.
func TumblingWindows(size time.Duration) Windows {
	return HoppingWindows(size, size)
}

// HoppingWindows returns windows of the given size starting every advance:
// a record falls into size/advance of them (rounded up). advance must be
// positive and at most size; both are whole milliseconds, Kafka's
// timestamp unit.
func HoppingWindows(size, advance time.Duration) Windows {
	w := Windows{size: size, advance: advance}
	switch {
	case size <= 0 || size%time.Millisecond != 0:
		w.err = fmt.Errorf("window size %v must be a positive whole number of milliseconds", size)
	case advance <= 0 || advance > size || advance%time.Millisecond != 0:
		w.err = fmt.Errorf("window advance %v must be a whole number of milliseconds in (0, size %v]", advance, size)
	}
	return w
}

// Grace returns w with grace period d: how long after a window ends, in
// stream time, a record may still be added to it. d is a whole number of
// milliseconds, >= 0.
func (w Windows) Grace(d time.Duration) Windows {
	if w.err == nil {
		w.err = graceErr(d)
	}
	w.grace = d
	return w
}

// graceErr says what is wrong with grace period d, if anything: it is a
// whole number of milliseconds, >= 0 (time windows and sessions).
func graceErr(d time.Duration) error {
	if d < 0 || d%time.Millisecond != 0 {
		return fmt.Errorf("grace period %v must be a whole number of milliseconds >= 0", d)
	}
	return nil
}

// Retain returns w with retention d: how long, in stream time, a window
// stays in the store after it starts. It must be at least size plus
// grace (the default).
func (w Windows) Retain(d time.Duration) Windows {
	w.retention = d
	return w
}

// Size, Advance, GracePeriod and Retention return w's settings, the
// retention with its default applied.
func (w Windows) Size() time.Duration        { return w.size }
func (w Windows) Advance() time.Duration     { return w.advance }
func (w Windows) GracePeriod() time.Duration { return w.grace }
func (w Windows) Retention() time.Duration {
	if w.retention == 0 {
		return w.size + w.grace
	}
	return w.retention
}

func (w Windows) check() error {
	switch {
	case w.err != nil:
		return w.err
	case w.size == 0:
		return errors.New("zero Windows: make them with TumblingWindows or HoppingWindows")
	case w.retention != 0 && (w.retention < w.size+w.grace || w.retention%time.Millisecond != 0):
		return fmt.Errorf("retention %v must be a whole number of milliseconds, at least size %v plus grace %v", w.retention, w.size, w.grace)
	}
	return nil
}

// starts returns the starts of the windows holding event time ts (in
// milliseconds), oldest first.
func (w Windows) starts(ts int64) []int64 {
	size, adv := w.size.Milliseconds(), w.advance.Milliseconds()
	last := floorDiv(ts, adv) * adv // the newest window holding ts
	var out []int64
	for s := last; s > ts-size; s -= adv {
		out = append(out, s)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// Windowed is the key of a windowed aggregation's result: the record key
// and the window. A time window holds [Start, End), End excluded; a
// session (SessionWindowedBy) holds [Start, End], the times of its first
// and last records.
type Windowed[K any] struct {
	Key        K
	Start, End time.Time
}

func (w Windowed[K]) String() string {
	return fmt.Sprintf("%v@[%d,%d)", w.Key, w.Start.UnixMilli(), w.End.UnixMilli())
}

// WindowedCodec encodes a Windowed key as Kafka Streams' time-windowed
// serde does: the key's bytes, then the window's start in milliseconds
// as 8 bytes big-endian. The end is not written; Decode computes it from
// size, which must be the windows' size.
func WindowedCodec[K any](keys Codec[K], size time.Duration) Codec[Windowed[K]] {
	return windowedCodec[K]{keys: keys, size: size}
}

type windowedCodec[K any] struct {
	keys Codec[K]
	size time.Duration
}

func (c windowedCodec[K]) Encode(w Windowed[K]) ([]byte, error) {
	kb, err := c.keys.Encode(w.Key)
	if err != nil {
		return nil, err
	}
	return binary.BigEndian.AppendUint64(kb, uint64(w.Start.UnixMilli())), nil
}

func (c windowedCodec[K]) Decode(b []byte) (Windowed[K], error) {
	if len(b) < 8 {
		return Windowed[K]{}, fmt.Errorf("windowed key of %d bytes: shorter than its 8-byte window start", len(b))
	}
	k, err := c.keys.Decode(b[:len(b)-8])
	if err != nil {
		return Windowed[K]{}, err
	}
	start := time.UnixMilli(int64(binary.BigEndian.Uint64(b[len(b)-8:])))
	return Windowed[K]{Key: k, Start: start, End: start.Add(c.size)}, nil
}

// TimeWindowed is a grouped stream with windows, ready for a windowed
// aggregation (WindowCount, WindowAggregate, WindowReduce).
type TimeWindowed[K, V any] struct {
	g Grouped[K, V]
	w Windows
}

// WindowedBy groups g's records by w as well as by key.
func WindowedBy[K, V any](g Grouped[K, V], w Windows) TimeWindowed[K, V] {
	return TimeWindowed[K, V]{g: g, w: w}
}

// WindowCount counts the records of each key in each window, in store
// storeName. Its result's key codec is WindowedCodec of the grouped
// stream's key codec.
func WindowCount[K, V any](tw TimeWindowed[K, V], storeName string) Table[Windowed[K], int64] {
	return windowAggregate(tw, storeName, "windowCount", Int64, func(_ K, _ V, n int64, _ bool) int64 { return n + 1 })
}

// WindowAggregate folds the records of each key in each window with fn,
// starting from init(), in store storeName, encoded with codec.
func WindowAggregate[K, V, A any](tw TimeWindowed[K, V], storeName string, init func() A, fn func(K, V, A) A, codec Codec[A]) Table[Windowed[K], A] {
	if b := tw.g.s.builder(); b.nilFunc("WindowAggregate into store "+strconv.Quote(storeName), tw.g.s.node, init, fn) {
		return brokenTable[Windowed[K], A](b, storeName)
	}
	return windowAggregate(tw, storeName, "windowAggregate", codec, func(k K, v V, agg A, found bool) A {
		if !found {
			agg = init()
		}
		return fn(k, v, agg)
	})
}

// WindowReduce combines the values of each key in each window with fn
// (a window's first value is kept as is), in store storeName encoded with
// the stream's value codec.
func WindowReduce[K, V any](tw TimeWindowed[K, V], storeName string, fn func(agg, v V) V) Table[Windowed[K], V] {
	if b := tw.g.s.builder(); b.nilFunc("WindowReduce into store "+strconv.Quote(storeName), tw.g.s.node, fn) {
		return brokenTable[Windowed[K], V](b, storeName)
	}
	return windowAggregate(tw, storeName, "windowReduce", tw.g.s.values, func(_ K, v V, agg V, found bool) V {
		if !found {
			return v
		}
		return fn(agg, v)
	})
}

// The layout of a windowed store:
//
//	windowMetaKey                          -> the store's stream time, 8 bytes big-endian ms
//	[window start, 8 bytes][encoded key]   -> the window's aggregate
//
// The start is big-endian with its sign bit flipped, so windows sort by
// start (negative times included) and the windows to expire are one key
// range: from windowFirstKey to the first key of the oldest start kept.
// windowMetaKey is one byte, so it sorts before windowFirstKey and never
// equals a window's key (at least 8 bytes).
var (
	windowMetaKey  = []byte{0}
	windowFirstKey = []byte{0, 0}
)

// WindowStoreKey is the key a windowed store (WindowedBy's aggregations)
// keeps the window of key starting at start under; with a nil key, the
// first key of the windows starting at start. Windows sort by start,
// then key.
func WindowStoreKey(start time.Time, key []byte) []byte { return windowKey(start.UnixMilli(), key) }

// ParseWindowStoreKey splits a windowed store's key into the window's
// start and the record key; false for the store's own records.
func ParseWindowStoreKey(k []byte) (start time.Time, key []byte, ok bool) {
	if len(k) < 8 {
		return time.Time{}, nil, false
	}
	return time.UnixMilli(int64(binary.BigEndian.Uint64(k) ^ (1 << 63))), k[8:], true
}

func windowKey(start int64, key []byte) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(key)), uint64(start)^(1<<63))
	return append(b, key...)
}

// lateRecorder is implemented by a Context that counts late records
// (the runtime's does, in baton_late_records_total).
type lateRecorder interface {
	LateRecord(store string)
}

func windowAggregate[K, V, A any](tw TimeWindowed[K, V], storeName, op string, codec Codec[A], fn func(k K, v V, agg A, found bool) A) Table[Windowed[K], A] {
	s, w := tw.g.s, tw.w
	b := s.builder()
	fail := func(format string, args ...any) Table[Windowed[K], A] {
		b.errorf(format, args...)
		return brokenTable[Windowed[K], A](b, storeName)
	}
	if s.node == "" {
		return brokenTable[Windowed[K], A](b, storeName)
	}
	if err := w.check(); err != nil {
		return fail("%s into store %q: %v", op, storeName, err)
	}
	if s.keys == nil || codec == nil {
		return fail("%s into store %q: no key codec or no codec for the aggregate (set them with WithCodecs)", op, storeName)
	}
	if b.storeByName[storeName] != nil {
		return fail("%s: store %q is already used", op, storeName)
	}
	keys := s.keys
	size, grace, retention := w.size.Milliseconds(), w.grace.Milliseconds(), w.Retention().Milliseconds()
	adv := w.advance.Milliseconds()
	out := addOp(s, op, func(t *task, name string, out fanout[Windowed[K], change[A]]) kvReceiver[K, V] {
		// Windows starting before expired were deleted by this processor.
		expired, expiredSet := int64(0), false
		return kvFunc[K, V](func(rec Record, k K, v V) error {
			st := t.ctx.Store(storeName)
			if st == nil {
				return t.fail(name, fmt.Errorf("the runtime gave no store %q", storeName))
			}
			storeErr := func(what string, err error) error {
				return t.fail(name, fmt.Errorf("store %q: %s: %w", storeName, what, err))
			}
			ts := rec.Timestamp.UnixMilli()
			// The store's stream time, then the record's.
			now, known := int64(0), false
			if b, ok, err := st.Get(windowMetaKey); err != nil {
				return storeErr("get stream time", err)
			} else if ok && len(b) == 8 {
				now, known = int64(binary.BigEndian.Uint64(b)), true
			}
			if !known || ts > now {
				now = ts
				if err := st.Put(windowMetaKey, binary.BigEndian.AppendUint64(nil, uint64(now))); err != nil {
					return storeErr("put stream time", err)
				}
			}
			kb, err := keys.Encode(k)
			if err != nil {
				return t.fail(name, fmt.Errorf("encode key for store %q: %w", storeName, err))
			}
			added := false
			for _, start := range w.starts(ts) {
				end := start + size
				if end+grace <= now {
					continue // closed
				}
				added = true
				wk := windowKey(start, kb)
				old, found, err := st.Get(wk)
				if err != nil {
					return storeErr("get", err)
				}
				var c change[A]
				if found {
					if c.old, err = codec.Decode(old); err != nil {
						return t.fail(name, fmt.Errorf("%w: store %q: window %d of key %q: %w", ErrDecode, storeName, start, kb, err))
					}
					c.hasOld = true
				}
				c.new, c.hasNew = fn(k, v, c.old, found), true
				nb, err := codec.Encode(c.new)
				if err != nil {
					return t.fail(name, fmt.Errorf("encode value for store %q: %w", storeName, err))
				}
				if err := st.Put(wk, nb); err != nil {
					return storeErr("put", err)
				}
				if err := out.emit(rec, Windowed[K]{Key: k, Start: time.UnixMilli(start), End: time.UnixMilli(end)}, c); err != nil {
					return err
				}
			}
			if !added {
				if lr, ok := t.ctx.(lateRecorder); ok {
					lr.LateRecord(storeName)
				}
				return nil
			}
			// Expire the windows that started more than the retention
			// before the stream time. Starts are multiples of the
			// advance, so the windows kept are those from keep on, and
			// that set changes only when keep does.
			keep := -floorDiv(retention-now, adv) * adv // the smallest multiple of adv >= now-retention
			if !expiredSet || keep > expired {
				err := st.Iterate(windowFirstKey, windowKey(keep, nil), func(key, _ []byte) error {
					return st.Delete(key)
				})
				if err != nil {
					return storeErr("expire windows", err)
				}
				expired, expiredSet = keep, true
			}
			return nil
		})
	})
	b.AddStore(storeName, out.node)
	b.markStore(storeName, WindowStore)
	return Table[Windowed[K], A]{b: b, changes: out.node, store: storeName, keys: WindowedCodec(keys, w.size), values: codec,
		windowed: true, closeAfter: w.grace}
}
