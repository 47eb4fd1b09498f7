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
// The grace period is 0 unless set with Grace.
func JoinWithin(d time.Duration) JoinWindows {
	w := JoinWindows{within: d}
	if d < 0 || d%time.Millisecond != 0 {
		w.err = fmt.Errorf("join window %v must be a whole number of milliseconds >= 0", d)
	}
	return w
}

// Grace returns w with grace period d: how far a record may be behind the
// stream time, beyond the window itself, and still join. A record more
// than the window plus the grace behind the stream time is late. The
// grace also says how long the left and outer joins wait before sending
// on a record that found no partner (see LeftJoinStreams). The default is
// 0, as Kafka Streams' JoinWindows.ofTimeDifferenceWithNoGrace; d is a
// whole number of milliseconds, >= 0.
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
// that never find a partner emit nothing: LeftJoinStreams and
// OuterJoinStreams send them on too).
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
	return joinStreams(left, right, w, name, "JoinStreams", false, false, func(k K, v1 V1, v2 V2, _, _ bool) R { return fn(k, v1, v2) })
}

// LeftJoinStreams is JoinStreams keeping every record of left: a left
// record that pairs with no right record is sent on once, with fn given
// found = false and a zero v2, when no right record can pair with it any
// more. Matched pairs are sent on as JoinStreams sends them, as soon as
// their second record comes, with found = true.
//
// A left record at time t pairs with right records of times up to
// t+within, and such a record is still taken (not late) until the stream
// time passes its own time plus the window plus the grace. So a left
// record's result is final once the stream time passes t + 2*within +
// grace: it is then sent on, unmatched, while the join processes the
// record (of either side) that moved the stream time past it, stamped
// with its own time t and carrying the headers of the record in process
// (stores keep none). Each left record is thus either in one or more
// pairs or sent on once unmatched, never both, and an unmatched result
// is never taken back. Kafka Streams (since 3.1) sends an unmatched
// record a window earlier, once the stream time passes t + within +
// grace, and may still pair it afterwards with a right record that comes
// out of order, giving both results for it; baton waits until no
// partner can come. A late left record is dropped and counted as in
// JoinStreams: it has no result at all.
//
// The left records still without a partner are listed in a third store,
// name+"-unmatched", with a changelog like the join's other stores, so
// a learner or standby restores it and a new owner sends on exactly
// what the old one would have: under exactly-once each unmatched record
// is sent on once, its removal from the store committed with it.
func LeftJoinStreams[K, V1, V2, R any](left Stream[K, V1], right Stream[K, V2], w JoinWindows, name string, fn func(k K, v1 V1, v2 V2, found bool) R) Stream[K, R] {
	b := left.builder()
	if left.node == "" || right.node == "" || b.nilFunc(fmt.Sprintf("LeftJoinStreams %q", name), left.node, fn) {
		return Stream[K, R]{b: b}
	}
	return joinStreams(left, right, w, name, "LeftJoinStreams", true, false, func(k K, v1 V1, v2 V2, _, has2 bool) R { return fn(k, v1, v2, has2) })
}

// OuterJoinStreams is LeftJoinStreams keeping the records of both sides:
// a record of either side that pairs with no record of the other is sent
// on once, when no record can pair with it any more, with fn given a
// zero value for the side that is missing and false for its has1 (the
// left side) or has2 (the right side). Matched pairs are sent on as soon
// as their second record comes, with has1 and has2 both true; fn never
// sees both false. A right-only join is LeftJoinStreams with the streams
// swapped.
func OuterJoinStreams[K, V1, V2, R any](left Stream[K, V1], right Stream[K, V2], w JoinWindows, name string, fn func(k K, v1 V1, v2 V2, has1, has2 bool) R) Stream[K, R] {
	b := left.builder()
	if left.node == "" || right.node == "" || b.nilFunc(fmt.Sprintf("OuterJoinStreams %q", name), left.node, fn) {
		return Stream[K, R]{b: b}
	}
	return joinStreams(left, right, w, name, "OuterJoinStreams", true, true, fn)
}

// joinStreams wires a stream-stream join: fn gives the result of a pair
// (both flags true) or of an unmatched record of a side kept by the join
// (leftOuter, rightOuter).
func joinStreams[K, V1, V2, R any](left Stream[K, V1], right Stream[K, V2], w JoinWindows, name, op string, leftOuter, rightOuter bool, fn func(k K, v1 V1, v2 V2, has1, has2 bool) R) Stream[K, R] {
	b := left.builder()
	lstore, rstore, ustore := name+"-left", name+"-right", ""
	if leftOuter || rightOuter {
		ustore = name + "-unmatched"
	}
	fail := func(format string, args ...any) Stream[K, R] {
		b.errorf("%s %q: "+format, append([]any{op, name}, args...)...)
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
	case ustore != "" && b.storeByName[ustore] != nil:
		return fail("store %q is already used", ustore)
	}
	within, grace := w.within.Milliseconds(), w.grace.Milliseconds()
	keys := left.keys
	// newCloser sends on the unmatched records closed at a stream time,
	// for the processor of either side.
	newCloser := func(t *task, node string, o fanout[K, R]) closer {
		if ustore == "" {
			return nil
		}
		return &unmatched[K, V1, V2, R]{t: t, node: node, store: ustore, bufs: [2]string{lstore, rstore},
			keys: keys, lvals: left.values, rvals: right.values, fn: fn, out: o, after: 2*within + grace}
	}
	lnode := addOp(left, "joinStreamsLeft", func(t *task, node string, o fanout[K, R]) kvReceiver[K, V1] {
		j := &streamJoin[K, V1, V2]{t: t, node: node, keys: keys, mine: lstore, theirs: rstore, within: within, grace: grace,
			mineVals: left.values, theirVals: right.values,
			side: leftSide, unmatched: ustore, mineOuter: leftOuter, theirsOuter: rightOuter, closer: newCloser(t, node, o)}
		return kvFunc[K, V1](func(rec Record, k K, v V1) error {
			return j.process(rec, k, v, func(ts int64, other V2) error { return emitPair(t, o, rec, k, ts, fn(k, v, other, true, true)) })
		})
	})
	rnode := addOp(right, "joinStreamsRight", func(t *task, node string, o fanout[K, R]) kvReceiver[K, V2] {
		j := &streamJoin[K, V2, V1]{t: t, node: node, keys: keys, mine: rstore, theirs: lstore, within: within, grace: grace,
			mineVals: right.values, theirVals: left.values,
			side: rightSide, unmatched: ustore, mineOuter: rightOuter, theirsOuter: leftOuter, closer: newCloser(t, node, o)}
		return kvFunc[K, V2](func(rec Record, k K, v V2) error {
			return j.process(rec, k, v, func(ts int64, other V1) error { return emitPair(t, o, rec, k, ts, fn(k, other, v, true, true)) })
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
	if ustore != "" {
		b.AddStore(ustore, lnode.node, rnode.node)
		b.markStore(ustore, InternalStore)
	}
	return Stream[K, R]{b: b, node: out, keys: keys, values: sameCodec[V1, R](left.values)}
}

// emitPair sends a joined pair on, stamped with the later of its two
// records' times.
func emitPair[K, R any](t *task, o fanout[K, R], rec Record, k K, other int64, r R) error {
	return emitAt(t, o, rec, k, max(rec.Timestamp.UnixMilli(), other), r)
}

// emitAt sends r on stamped with time at (in milliseconds), and puts
// back the time of the record in process after.
func emitAt[K, R any](t *task, o fanout[K, R], rec Record, k K, at int64, r R) error {
	ts := time.UnixMilli(at)
	if setter, ok := t.ctx.(timestampSetter); ok && !ts.Equal(rec.Timestamp) {
		setter.SetTimestamp(ts)
		defer setter.SetTimestamp(rec.Timestamp)
	}
	rec.Timestamp = ts
	return o.emit(rec, k, r)
}

// The sides of a stream-stream join, as written in the unmatched store.
const (
	leftSide  byte = 0
	rightSide byte = 1
)

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
//
// A left or outer join lists in its unmatched store the records of its
// kept sides that have no partner yet:
//
//	[time, 8][side, 1][sequence, 8][key]  -> empty
//
// in the order they close (time, then left before right, then arrival),
// so that the records closed at a stream time are one range from the
// store's first key. A record's entry is written when it comes without a
// partner and deleted when a partner comes or when it is sent on.
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

	side                   byte   // leftSide or rightSide: this processor's
	unmatched              string // the unmatched store; "" for an inner join
	mineOuter, theirsOuter bool   // whether this side's, the other side's, unmatched records are kept
	closer                 closer // sends on closed unmatched records; nil for an inner join
}

// closer sends on the unmatched records closed at stream time now.
type closer interface {
	close(rec Record, now int64) error
}

var joinMetaKey = []byte{0}

func joinKey(kb []byte, ts int64, seq uint64) []byte {
	b := make([]byte, 0, 4+len(kb)+16)
	b = binary.BigEndian.AppendUint32(b, uint32(len(kb)))
	b = append(b, kb...)
	b = binary.BigEndian.AppendUint64(b, uint64(ts)^(1<<63))
	return binary.BigEndian.AppendUint64(b, seq)
}

func unmatchedKey(ts int64, side byte, seq uint64, kb []byte) []byte {
	b := make([]byte, 0, 17+len(kb))
	b = binary.BigEndian.AppendUint64(b, uint64(ts)^(1<<63))
	b = append(b, side)
	b = binary.BigEndian.AppendUint64(b, seq)
	return append(b, kb...)
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
	var unmatched Store
	if j.unmatched != "" {
		if unmatched = t.ctx.Store(j.unmatched); unmatched == nil {
			return t.fail(j.node, fmt.Errorf("the runtime gave no store %q", j.unmatched))
		}
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
	// order; a partner kept by a left or outer join is matched now.
	paired := false
	err = theirs.Iterate(joinKey(kb, ts-j.within, 0), joinKey(kb, ts+j.within+1, 0), func(key, value []byte) error {
		paired = true
		w, err := j.theirVals.Decode(value)
		if err != nil {
			return t.fail(j.node, fmt.Errorf("%w: store %q: value of key %q: %w", ErrDecode, j.theirs, key, err))
		}
		at := int64(binary.BigEndian.Uint64(key[len(key)-16:]) ^ (1 << 63))
		if j.theirsOuter {
			if err := j.matched(unmatched, unmatchedKey(at, 1-j.side, binary.BigEndian.Uint64(key[len(key)-8:]), kb)); err != nil {
				return err
			}
		}
		return emit(at, w)
	})
	if err != nil {
		return err
	}
	if j.mineOuter && !paired {
		if err := unmatched.Put(unmatchedKey(ts, j.side, seq, kb), []byte{}); err != nil {
			return fail("store "+j.unmatched+": put", err)
		}
	}
	if j.closer != nil {
		if err := j.closer.close(rec, now); err != nil {
			return err
		}
	}
	return j.sweep(now, mine, theirs)
}

// matched deletes a record's entry from the unmatched store, if it is
// there.
func (j *streamJoin[K, V, W]) matched(unmatched Store, key []byte) error {
	_, found, err := unmatched.Get(key)
	if err == nil && found {
		err = unmatched.Delete(key)
	}
	if err != nil {
		return j.t.fail(j.node, fmt.Errorf("store %q: delete a matched record: %w", j.unmatched, err))
	}
	return nil
}

// unmatched sends on the records of a left or outer join that found no
// partner, once no record can pair with them any more: at a stream time
// more than after (twice the window plus the grace) past their time.
type unmatched[K, V1, V2, R any] struct {
	t     *task
	node  string
	store string
	bufs  [2]string // the left and right buffers, by side
	keys  Codec[K]
	lvals Codec[V1]
	rvals Codec[V2]
	fn    func(K, V1, V2, bool, bool) R
	out   fanout[K, R]
	after int64
}

func (u *unmatched[K, V1, V2, R]) close(rec Record, now int64) error {
	t := u.t
	st := t.ctx.Store(u.store)
	if st == nil {
		return t.fail(u.node, fmt.Errorf("the runtime gave no store %q", u.store))
	}
	var sendErr error
	// The records of times before now-after, in the order they closed.
	end := binary.BigEndian.AppendUint64(nil, uint64(now-u.after)^(1<<63))
	err := st.Iterate(nil, end, func(key, _ []byte) error {
		sendErr = u.send(st, rec, key)
		return sendErr
	})
	if sendErr != nil {
		return sendErr
	}
	if err != nil {
		return t.fail(u.node, fmt.Errorf("store %q: send unmatched records: %w", u.store, err))
	}
	return nil
}

// send sends on the unmatched record of key, read from its side's
// buffer, and deletes the key.
func (u *unmatched[K, V1, V2, R]) send(st Store, rec Record, key []byte) error {
	t := u.t
	if len(key) < 17 || key[8] > rightSide {
		return t.fail(u.node, fmt.Errorf("store %q: not an unmatched record's key: %q", u.store, key))
	}
	at := int64(binary.BigEndian.Uint64(key) ^ (1 << 63))
	side, seq, kb := key[8], binary.BigEndian.Uint64(key[9:17]), key[17:]
	buf := t.ctx.Store(u.bufs[side])
	if buf == nil {
		return t.fail(u.node, fmt.Errorf("the runtime gave no store %q", u.bufs[side]))
	}
	vb, found, err := buf.Get(joinKey(kb, at, seq))
	if err != nil {
		return t.fail(u.node, fmt.Errorf("store %q: get: %w", u.bufs[side], err))
	}
	if !found {
		return t.fail(u.node, fmt.Errorf("store %q lists a record that store %q does not hold: %q", u.store, u.bufs[side], key))
	}
	k, err := u.keys.Decode(kb)
	if err != nil {
		return t.fail(u.node, fmt.Errorf("%w: store %q: key %q: %w", ErrDecode, u.store, key, err))
	}
	var r R
	if side == leftSide {
		v, err := u.lvals.Decode(vb)
		if err != nil {
			return t.fail(u.node, fmt.Errorf("%w: store %q: value of key %q: %w", ErrDecode, u.bufs[side], joinKey(kb, at, seq), err))
		}
		var zero V2
		r = u.fn(k, v, zero, true, false)
	} else {
		v, err := u.rvals.Decode(vb)
		if err != nil {
			return t.fail(u.node, fmt.Errorf("%w: store %q: value of key %q: %w", ErrDecode, u.bufs[side], joinKey(kb, at, seq), err))
		}
		var zero V1
		r = u.fn(k, zero, v, false, true)
	}
	if err := st.Delete(key); err != nil {
		return t.fail(u.node, fmt.Errorf("store %q: delete: %w", u.store, err))
	}
	return emitAt(t, u.out, rec, k, at, r)
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
