package topology

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// SessionWindows says how a session-windowed aggregation groups a key's
// records: into sessions of activity separated by gaps of inactivity.
// Make them with InactivityGap, then set a grace period and a retention.
//
// A session is the run of a key's records whose event times follow each
// other by at most the gap; its window is [Start, End], the times of its
// first and last records (End included: a session of one record has
// Start == End). A record within the gap of a session (Start-gap <= t <=
// End+gap) joins it; a record within the gap of two sessions bridges them
// into one.
//
// Each session store keeps its stream time, like a windowed store. A
// session is closed once the stream time is past its End by more than
// the gap plus the grace period: by then no record the store accepts
// could reach it. A record is accepted if it is at most the grace period
// behind the stream time, or if it falls within an open session or
// within the gap after one (it then changes only open sessions). Any
// other record is late: it would start a session that is already closed
// or change a closed one, so it is dropped and counted in the runtime's
// baton_late_records_total. Once a session is closed it never changes
// again, which is what SuppressUntilWindowCloses relies on.
//
// Retention is how long a session stays in the store after its End, in
// stream time: it is deleted once the stream time is past its End by more
// than the retention (a tombstone in its changelog; nothing is sent on).
// It must be at least the gap plus the grace, its default, so that no
// open session is deleted. Sessions past the retention are found by a
// scan of the whole store, run when the stream time has moved on by the
// gap plus the grace since the last, so one may stay that much longer;
// a session past the retention is closed, so its staying changes
// nothing but the store's size.
//
// The session store is a store like any other, with a changelog. It
// holds its stream time under the one-byte key 0x00, and each session
// under [key length, 4 bytes][encoded key][End, 8 bytes][Start, 8 bytes],
// lengths big-endian, times in milliseconds big-endian with the sign bit
// flipped so that they sort as numbers. One key's sessions are one key
// range, sorted by End and, as they never overlap, by Start too: the
// sessions within the gap of a record are one short range scan from the
// first whose End is at least its time minus the gap.
type SessionWindows struct {
	gap, grace, retention time.Duration
	err                   error
}

// InactivityGap returns session windows closing a key's session after gap
// without a record: records of a key at most gap apart are one session.
// gap is a positive whole number of milliseconds; the grace period is 0
// until set.
func InactivityGap(gap time.Duration) SessionWindows {
	w := SessionWindows{gap: gap}
	if gap <= 0 || gap%time.Millisecond != 0 {
		w.err = fmt.Errorf("inactivity gap %v must be a positive whole number of milliseconds", gap)
	}
	return w
}

// Grace returns w with grace period d: how far behind the stream time a
// record may be and still start or extend a session. d is a whole number
// of milliseconds, >= 0.
func (w SessionWindows) Grace(d time.Duration) SessionWindows {
	if w.err == nil {
		w.err = graceErr(d)
	}
	w.grace = d
	return w
}

// Retain returns w with retention d: how long, in stream time, a session
// stays in the store after its End. It must be at least the gap plus the
// grace (the default).
func (w SessionWindows) Retain(d time.Duration) SessionWindows {
	w.retention = d
	return w
}

// Gap, GracePeriod and Retention return w's settings, the retention with
// its default applied.
func (w SessionWindows) Gap() time.Duration         { return w.gap }
func (w SessionWindows) GracePeriod() time.Duration { return w.grace }
func (w SessionWindows) Retention() time.Duration {
	if w.retention == 0 {
		return w.gap + w.grace
	}
	return w.retention
}

func (w SessionWindows) check() error {
	switch {
	case w.err != nil:
		return w.err
	case w.gap == 0:
		return errors.New("zero SessionWindows: make them with InactivityGap")
	case w.retention != 0 && (w.retention < w.gap+w.grace || w.retention%time.Millisecond != 0):
		return fmt.Errorf("retention %v must be a whole number of milliseconds, at least gap %v plus grace %v", w.retention, w.gap, w.grace)
	}
	return nil
}

// closeAfter is how long after a session's End, in stream time, it
// closes: the first stream time past End by more than gap plus grace.
func (w SessionWindows) closeAfter() time.Duration { return w.gap + w.grace + time.Millisecond }

// SessionWindowedCodec encodes a session's Windowed key as Kafka Streams'
// session-windowed serde does: the key's bytes, then the session's End
// and Start in milliseconds, 8 bytes big-endian each.
func SessionWindowedCodec[K any](keys Codec[K]) Codec[Windowed[K]] {
	return sessionCodec[K]{keys: keys}
}

type sessionCodec[K any] struct{ keys Codec[K] }

func (c sessionCodec[K]) Encode(w Windowed[K]) ([]byte, error) {
	kb, err := c.keys.Encode(w.Key)
	if err != nil {
		return nil, err
	}
	kb = binary.BigEndian.AppendUint64(kb, uint64(w.End.UnixMilli()))
	return binary.BigEndian.AppendUint64(kb, uint64(w.Start.UnixMilli())), nil
}

func (c sessionCodec[K]) Decode(b []byte) (Windowed[K], error) {
	if len(b) < 16 {
		return Windowed[K]{}, fmt.Errorf("session key of %d bytes: shorter than its 16 bytes of end and start", len(b))
	}
	k, err := c.keys.Decode(b[:len(b)-16])
	if err != nil {
		return Windowed[K]{}, err
	}
	end := int64(binary.BigEndian.Uint64(b[len(b)-16:]))
	start := int64(binary.BigEndian.Uint64(b[len(b)-8:]))
	return Windowed[K]{Key: k, Start: time.UnixMilli(start), End: time.UnixMilli(end)}, nil
}

// SessionWindowed is a grouped stream with session windows, ready for a
// session aggregation (SessionCount, SessionAggregate, SessionReduce).
type SessionWindowed[K, V any] struct {
	g Grouped[K, V]
	w SessionWindows
}

// SessionWindowedBy groups g's records into sessions per key (see
// SessionWindows).
func SessionWindowedBy[K, V any](g Grouped[K, V], w SessionWindows) SessionWindowed[K, V] {
	return SessionWindowed[K, V]{g: g, w: w}
}

// SessionCount counts the records of each session, in store storeName.
// Its result is keyed by Windowed with the session's Start and End,
// encoded with SessionWindowedCodec of the grouped stream's key codec.
func SessionCount[K, V any](sw SessionWindowed[K, V], storeName string) Table[Windowed[K], int64] {
	return sessionAggregate(sw, storeName, "sessionCount", Int64,
		func(_ K, _ V, n int64, _ bool) int64 { return n + 1 },
		func(_ K, a, b int64) int64 { return a + b })
}

// SessionAggregate folds the records of each session with add, starting
// from init() for a new session, in store storeName encoded with codec.
// When a record bridges sessions, merge(k, a, b) combines their
// aggregates, a the earlier session's, in time order, before add adds
// the record. Its result is keyed as SessionCount's.
func SessionAggregate[K, V, A any](sw SessionWindowed[K, V], storeName string, init func() A, add func(K, V, A) A, merge func(k K, a, b A) A, codec Codec[A]) Table[Windowed[K], A] {
	if b := sw.g.s.builder(); b.nilFunc("SessionAggregate into store "+strconv.Quote(storeName), sw.g.s.node, init, add, merge) {
		return brokenTable[Windowed[K], A](b, storeName)
	}
	return sessionAggregate(sw, storeName, "sessionAggregate", codec, func(k K, v V, agg A, found bool) A {
		if !found {
			agg = init()
		}
		return add(k, v, agg)
	}, merge)
}

// SessionReduce combines the values of each session with fn (a session's
// first value is kept as is), in store storeName encoded with the
// stream's value codec; fn also merges the values of sessions a record
// bridges, the earlier one first. Its result is keyed as SessionCount's.
func SessionReduce[K, V any](sw SessionWindowed[K, V], storeName string, fn func(agg, v V) V) Table[Windowed[K], V] {
	if b := sw.g.s.builder(); b.nilFunc("SessionReduce into store "+strconv.Quote(storeName), sw.g.s.node, fn) {
		return brokenTable[Windowed[K], V](b, storeName)
	}
	return sessionAggregate(sw, storeName, "sessionReduce", sw.g.s.values, func(_ K, v V, agg V, found bool) V {
		if !found {
			return v
		}
		return fn(agg, v)
	}, func(_ K, a, b V) V { return fn(a, b) })
}

// The layout of a session store (see SessionWindows):
//
//	sessionMetaKey                          -> the store's stream time, 8 bytes big-endian ms
//	[key length, 4][key][end, 8][start, 8]  -> the session's aggregate
//
// The sessions within the gap of a record at t are those from the first
// whose end is at least t-gap up to the last whose start is at most
// t+gap. sessionMetaKey is one byte, shorter than any session's key (at
// least 20 bytes).
var sessionMetaKey = []byte{0}

func sessionPrefix(kb []byte) []byte {
	b := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(kb)+16), uint32(len(kb)))
	return append(b, kb...)
}

func sessionKey(prefix []byte, start, end int64) []byte {
	b := append(make([]byte, 0, len(prefix)+16), prefix...)
	b = binary.BigEndian.AppendUint64(b, uint64(end)^(1<<63))
	return binary.BigEndian.AppendUint64(b, uint64(start)^(1<<63))
}

// parseSessionKey returns the session's start and end; false for the
// store's own records.
func parseSessionKey(k []byte) (start, end int64, ok bool) {
	if len(k) < 20 {
		return 0, 0, false
	}
	t := k[len(k)-16:]
	return int64(binary.BigEndian.Uint64(t[8:]) ^ (1 << 63)), int64(binary.BigEndian.Uint64(t) ^ (1 << 63)), true
}

// errStopScan ends an Iterate early.
var errStopScan = errors.New("topology: stop scan")

// session is one stored session of the key in process.
type session[A any] struct {
	start, end int64
	agg        A
}

func sessionAggregate[K, V, A any](sw SessionWindowed[K, V], storeName, op string, codec Codec[A], add func(k K, v V, agg A, found bool) A, merge func(k K, a, b A) A) Table[Windowed[K], A] {
	s, w := sw.g.s, sw.w
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
	gap, grace, retention := w.gap.Milliseconds(), w.grace.Milliseconds(), w.Retention().Milliseconds()
	out := addOp(s, op, func(t *task, name string, out fanout[Windowed[K], change[A]]) kvReceiver[K, V] {
		// The stream time of this processor's last sweep of expired
		// sessions.
		swept, sweptSet := int64(0), false
		return kvFunc[K, V](func(rec Record, k K, v V) error {
			st := t.ctx.Store(storeName)
			if st == nil {
				return t.fail(name, fmt.Errorf("the runtime gave no store %q", storeName))
			}
			storeErr := func(what string, err error) error {
				return t.fail(name, fmt.Errorf("store %q: %s: %w", storeName, what, err))
			}
			ts := rec.Timestamp.UnixMilli()
			now, known := int64(0), false
			if b, ok, err := st.Get(sessionMetaKey); err != nil {
				return storeErr("get stream time", err)
			} else if ok && len(b) == 8 {
				now, known = int64(binary.BigEndian.Uint64(b)), true
			}
			if !known || ts > now {
				now = ts
				if err := st.Put(sessionMetaKey, binary.BigEndian.AppendUint64(nil, uint64(now))); err != nil {
					return storeErr("put stream time", err)
				}
			}
			kb, err := keys.Encode(k)
			if err != nil {
				return t.fail(name, fmt.Errorf("encode key for store %q: %w", storeName, err))
			}
			prefix := sessionPrefix(kb)
			// The key's sessions within the gap of ts, in time order;
			// none ends after now.
			var near []session[A]
			var decodeErr error
			err = st.Iterate(sessionKey(prefix, math.MinInt64, ts-gap), sessionKey(prefix, math.MinInt64, now+1), func(key, value []byte) error {
				start, end, _ := parseSessionKey(key)
				if start > ts+gap {
					return errStopScan
				}
				agg, err := codec.Decode(value)
				if err != nil {
					decodeErr = t.fail(name, fmt.Errorf("%w: store %q: session [%d,%d] of key %q: %w", ErrDecode, storeName, start, end, kb, err))
					return decodeErr
				}
				near = append(near, session[A]{start: start, end: end, agg: agg})
				return nil
			})
			if decodeErr != nil {
				return decodeErr
			}
			if err != nil && !errors.Is(err, errStopScan) {
				return storeErr("find sessions", err)
			}
			// Accepted: at most the grace behind the stream time, or
			// within an open session or the gap after it. The only
			// session that can hold ts that way is the first near one.
			open := func(end int64) bool { return now-end <= gap+grace }
			onTime := now-ts <= grace
			if !onTime && (len(near) == 0 || near[0].start > ts || !open(near[0].end)) {
				if lr, ok := t.ctx.(lateRecorder); ok {
					lr.LateRecord(storeName)
				}
				return nil
			}
			start, end := ts, ts
			var c change[A]
			var agg A
			for i, n := range near {
				start, end = min(start, n.start), max(end, n.end)
				if i == 0 {
					agg = n.agg
				} else {
					agg = merge(k, agg, n.agg)
				}
			}
			for _, n := range near {
				if n.start == start && n.end == end {
					c.old, c.hasOld = n.agg, true // the same session, updated
					continue
				}
				// Merged into the new session, or extended: its
				// window is gone.
				if err := st.Delete(sessionKey(prefix, n.start, n.end)); err != nil {
					return storeErr("delete", err)
				}
				gone := change[A]{old: n.agg, hasOld: true}
				if err := out.emit(rec, Windowed[K]{Key: k, Start: time.UnixMilli(n.start), End: time.UnixMilli(n.end)}, gone); err != nil {
					return err
				}
			}
			c.new, c.hasNew = add(k, v, agg, len(near) > 0), true
			nb, err := codec.Encode(c.new)
			if err != nil {
				return t.fail(name, fmt.Errorf("encode value for store %q: %w", storeName, err))
			}
			if err := st.Put(sessionKey(prefix, start, end), nb); err != nil {
				return storeErr("put", err)
			}
			if err := out.emit(rec, Windowed[K]{Key: k, Start: time.UnixMilli(start), End: time.UnixMilli(end)}, c); err != nil {
				return err
			}
			// Delete the sessions past their End by more than the
			// retention: one scan of the store each time the stream
			// time has moved on by the gap plus the grace.
			if sweptSet && now-swept < gap+grace {
				return nil
			}
			err = st.Iterate(nil, nil, func(key, _ []byte) error {
				if _, end, ok := parseSessionKey(key); ok && now-end > retention {
					return st.Delete(key)
				}
				return nil
			})
			if err != nil {
				return storeErr("expire sessions", err)
			}
			swept, sweptSet = now, true
			return nil
		})
	})
	b.AddStore(storeName, out.node)
	b.markStore(storeName, SessionStore)
	return Table[Windowed[K], A]{b: b, changes: out.node, store: storeName, keys: SessionWindowedCodec(keys), values: codec,
		windowed: true, closeAfter: w.closeAfter()}
}
