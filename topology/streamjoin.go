package topology

import (
	"encoding/binary"
	"fmt"
	"time"
)

// JoinWindows says which records of two streams join: those with the same
// key whose event times are at most Within apart. Make them with
// JoinWithin; set a grace period with Grace.
type JoinWindows struct {
	within, grace time.Duration
	err           error
}

// JoinWithin returns join windows pairing records whose event times differ
// by at most d (either way). d is a whole number of milliseconds, >= 0.
func JoinWithin(d time.Duration) JoinWindows {
	w := JoinWindows{within: d}
	if d < 0 || d%time.Millisecond != 0 {
		w.err = fmt.Errorf("join window %v must be a whole number of milliseconds >= 0", d)
	}
	return w
}

// Grace returns w with grace period d: how far behind the stream time a
// record may be and still join (beyond the window itself).
func (w JoinWindows) Grace(d time.Duration) JoinWindows {
	if w.err == nil && (d < 0 || d%time.Millisecond != 0) {
		w.err = fmt.Errorf("join grace period %v must be a whole number of milliseconds >= 0", d)
	}
	w.grace = d
	return w
}

// JoinStreams joins two streams on their key within a time window: for
// each pair of records, one from each side, with the same key and event
// times at most w's Within apart, fn's result is sent on with the key and
// the later of the two times. A pair is emitted once, when its second
// record is processed, whichever side that is (an inner join; records
// that never find a partner emit nothing).
//
// Each side's records are kept in a store, name+"-left" and name+"-right",
// encoded with the side's value codec (both streams need codecs), for as
// long as a later record could still pair with them: twice the window
// plus the grace period behind the join's stream time (the largest event
// time either side has processed, kept in the stores, so a new owner goes
// on from it). A record more than the window plus the grace period
// behind the stream time is late: it is dropped, and counted in the
// runtime's baton_late_records_total (label store name+"-left" or
// name+"-right").
//
// The two streams are co-partitioned, as for JoinTable: their topics
// must have the same number of partitions, and a stream whose key may
// have changed (Map, FlatMap, SelectKey) is repartitioned first
// (Repartition).
func JoinStreams[K, V1, V2, R any](left Stream[K, V1], right Stream[K, V2], w JoinWindows, name string, fn func(k K, v1 V1, v2 V2) R) Stream[K, R] {
	b := left.builder()
	if left.node == "" || right.node == "" || b.nilFunc(fmt.Sprintf("JoinStreams %q", name), left.node, fn) {
		return Stream[K, R]{b: b}
	}
	lstore, rstore := name+"-left", name+"-right"
	fail := func(format string, args ...any) Stream[K, R] {
		b.errorf("JoinStreams %q: "+format, append([]any{name}, args...)...)
		return Stream[K, R]{b: b}
	}
	switch {
	case right.b != b:
		return fail("the right stream belongs to another Builder")
	case w.err != nil:
		return fail("%v", w.err)
	case left.keys == nil || left.values == nil || right.values == nil:
		return fail("both streams need codecs (set them with WithCodecs)")
	case left.keyChanged || right.keyChanged:
		return fail("a stream may have a new key (Map, FlatMap, SelectKey): Repartition it first")
	case b.storeByName[lstore] != nil || b.storeByName[rstore] != nil:
		return fail("store %q or %q is already used", lstore, rstore)
	}
	within, grace := w.within.Milliseconds(), w.grace.Milliseconds()
	keys := left.keys
	lnode := addOp(left, "joinStreamsLeft", func(t *task, node string, o fanout[K, R]) kvReceiver[K, V1] {
		j := &streamJoin[K, V1, V2]{t: t, node: node, keys: keys, mine: lstore, theirs: rstore, within: within, grace: grace,
			mineVals: left.values, theirVals: right.values}
		return kvFunc[K, V1](func(rec Record, k K, v V1) error {
			return j.process(rec, k, v, func(ts int64, other V2) error { return emitPair(t, o, rec, k, ts, fn(k, v, other)) })
		})
	})
	rnode := addOp(right, "joinStreamsRight", func(t *task, node string, o fanout[K, R]) kvReceiver[K, V2] {
		j := &streamJoin[K, V2, V1]{t: t, node: node, keys: keys, mine: rstore, theirs: lstore, within: within, grace: grace,
			mineVals: right.values, theirVals: left.values}
		return kvFunc[K, V2](func(rec Record, k K, v V2) error {
			return j.process(rec, k, v, func(ts int64, other V1) error { return emitPair(t, o, rec, k, ts, fn(k, other, v)) })
		})
	})
	out := b.nodeName("joinStreams")
	b.add(&node{
		name: out, kind: processorKind, parents: []string{lnode.node, rnode.node},
		in: portOf[K, R](), out: portOf[K, R](), desc: typesOf[K, R](),
		build: func(t *task, n *node, children []any) (any, error) {
			cs, err := childrenAs[kvReceiver[K, R]](n, children)
			if err != nil {
				return nil, err
			}
			return kvFunc[K, R](fanout[K, R](cs).emit), nil
		},
	})
	b.AddStore(lstore, lnode.node, rnode.node)
	b.AddStore(rstore, lnode.node, rnode.node)
	b.markStore(lstore, InternalStore)
	b.markStore(rstore, InternalStore)
	return Stream[K, R]{b: b, node: out, keys: keys, values: sameCodec[V1, R](left.values)}
}

// emitPair sends a joined pair on, stamped with the later of its two
// records' times.
func emitPair[K, R any](t *task, o fanout[K, R], rec Record, k K, other int64, r R) error {
	ts := rec.Timestamp
	if o := time.UnixMilli(other); o.After(ts) {
		ts = o
	}
	setter, ok := t.ctx.(timestampSetter)
	if ok && !ts.Equal(rec.Timestamp) {
		setter.SetTimestamp(ts)
		defer setter.SetTimestamp(rec.Timestamp)
	}
	rec.Timestamp = ts
	return o.emit(rec, k, r)
}

// streamJoin is one side of a stream-stream join in one task. Its store
// layout (both sides alike):
//
//	joinMetaKey                                 -> stream time (8 bytes), sequence (8 bytes)
//	[key length, 4][key][time, 8][sequence, 8]  -> the record's encoded value
//
// The length prefix makes one key's records one range, in time order;
// times are big-endian with the sign bit flipped. The sequence tells
// apart records of one key and time. joinMetaKey is one byte: shorter
// than any record's key, it is told apart by length.
type streamJoin[K, V, W any] struct {
	t             *task
	node          string
	keys          Codec[K]
	mine, theirs  string
	within, grace int64
	mineVals      Codec[V]
	theirVals     Codec[W]
	swept         int64 // the stream time of this processor's last sweep
	sweptSet      bool
}

var joinMetaKey = []byte{0}

func joinKey(kb []byte, ts int64, seq uint64) []byte {
	b := make([]byte, 0, 4+len(kb)+16)
	b = binary.BigEndian.AppendUint32(b, uint32(len(kb)))
	b = append(b, kb...)
	b = binary.BigEndian.AppendUint64(b, uint64(ts)^(1<<63))
	return binary.BigEndian.AppendUint64(b, seq)
}

// joinMeta reads a store's stream time and next sequence.
func joinMeta(st Store) (now int64, known bool, seq uint64, err error) {
	b, ok, err := st.Get(joinMetaKey)
	if err != nil || !ok || len(b) != 16 {
		return 0, false, 0, err
	}
	return int64(binary.BigEndian.Uint64(b)), true, binary.BigEndian.Uint64(b[8:]), nil
}

func (j *streamJoin[K, V, W]) process(rec Record, k K, v V, emit func(ts int64, other W) error) error {
	t := j.t
	fail := func(what string, err error) error { return t.fail(j.node, fmt.Errorf("%s: %w", what, err)) }
	mine, theirs := t.ctx.Store(j.mine), t.ctx.Store(j.theirs)
	if mine == nil || theirs == nil {
		return t.fail(j.node, fmt.Errorf("the runtime gave no store %q or %q", j.mine, j.theirs))
	}
	ts := rec.Timestamp.UnixMilli()
	now, known, seq, err := joinMeta(mine)
	if err != nil {
		return fail("store "+j.mine+": get stream time", err)
	}
	other, otherKnown, _, err := joinMeta(theirs)
	if err != nil {
		return fail("store "+j.theirs+": get stream time", err)
	}
	if otherKnown && (!known || other > now) {
		now, known = other, true
	}
	if known && ts < now-j.within-j.grace {
		if lr, ok := t.ctx.(lateRecorder); ok {
			lr.LateRecord(j.mine)
		}
		return nil
	}
	if !known || ts > now {
		now = ts
	}
	kb, err := j.keys.Encode(k)
	if err != nil {
		return t.fail(j.node, fmt.Errorf("encode key for store %q: %w", j.mine, err))
	}
	vb, err := j.mineVals.Encode(v)
	if err != nil {
		return t.fail(j.node, fmt.Errorf("encode value for store %q: %w", j.mine, err))
	}
	if err := mine.Put(joinKey(kb, ts, seq), vb); err != nil {
		return fail("store "+j.mine+": put", err)
	}
	meta := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(now)), seq+1)
	if err := mine.Put(joinMetaKey, meta); err != nil {
		return fail("store "+j.mine+": put stream time", err)
	}
	// The other side's records of this key within the window, in time
	// order.
	err = theirs.Iterate(joinKey(kb, ts-j.within, 0), joinKey(kb, ts+j.within+1, 0), func(key, value []byte) error {
		w, err := j.theirVals.Decode(value)
		if err != nil {
			return t.fail(j.node, fmt.Errorf("%w: store %q: value of key %q: %w", ErrDecode, j.theirs, key, err))
		}
		at := int64(binary.BigEndian.Uint64(key[len(key)-16:]) ^ (1 << 63))
		return emit(at, w)
	})
	if err != nil {
		return err
	}
	return j.sweep(now, mine, theirs)
}

// sweep deletes from both sides' stores the records no later record can
// pair with (more than twice the window plus the grace behind the stream
// time), once per window-plus-grace of stream time.
func (j *streamJoin[K, V, W]) sweep(now int64, stores ...Store) error {
	period := max(j.within+j.grace, 1)
	if j.sweptSet && now-j.swept < period {
		return nil
	}
	cutoff := now - 2*j.within - j.grace
	for i, st := range stores {
		err := st.Iterate(nil, nil, func(key, _ []byte) error {
			if len(key) < 20 {
				return nil // the meta key
			}
			if at := int64(binary.BigEndian.Uint64(key[len(key)-16:]) ^ (1 << 63)); at < cutoff {
				return st.Delete(key)
			}
			return nil
		})
		if err != nil {
			return j.t.fail(j.node, fmt.Errorf("store %q: expire records: %w", []string{j.mine, j.theirs}[i], err))
		}
	}
	j.swept, j.sweptSet = now, true
	return nil
}
