package topology

import (
	"encoding/binary"
	"fmt"
)

// SuppressUntilWindowCloses holds back the updates of a windowed table
// (from WindowCount, WindowAggregate, WindowReduce or a session
// aggregation) and sends on only each window's final value, once, when
// the window closes: for time windows when the stream time reaches the
// window's end plus the grace period, for sessions when it is past the
// session's End by more than the gap plus the grace (see Windows and
// SessionWindows). A window that closes emits nothing more afterwards,
// since the aggregation drops the records that would change it as late.
//
// The latest value of each open window waits in store storeName, a store
// with a changelog like any other: a learner or standby restores it, so
// a new owner emits what the old one held back, and under exactly-once
// the emission and the entry's deletion from the store commit together,
// so each closed window is sent on exactly once. The aggregation's stream
// time moves only with records that update a window, so the buffer
// closes windows by the times of the updates it is given: an update at
// time t sends on every window closed at t. A session merged into another before it
// closed is dropped from the buffer: only sessions that close are sent
// on. What is sent on carries the timestamp of the record whose stream
// time closed the window.
//
// The result is a table of final values that is not materialized (it
// has no store of its own); send it on with ToStream or ToTopic. Its keys
// and values have the windowed table's codecs, which the buffer uses as
// well.
func SuppressUntilWindowCloses[K, V any](t Table[Windowed[K], V], storeName string) Table[Windowed[K], V] {
	b := t.b
	if b == nil {
		panic("topology: use of a zero Table")
	}
	fail := func(format string, args ...any) Table[Windowed[K], V] {
		b.errorf("SuppressUntilWindowCloses into store %q: "+format, append([]any{storeName}, args...)...)
		return brokenTable[Windowed[K], V](b, "")
	}
	switch {
	case t.changes == "":
		return brokenTable[Windowed[K], V](b, "") // a mistake already recorded
	case !t.windowed:
		return fail("the table of %s is not the result of a windowed aggregation", t.changes)
	case t.keys == nil || t.values == nil:
		return fail("the table of %s has no codecs", t.changes)
	case b.storeByName[storeName] != nil:
		return fail("store %q is already used", storeName)
	}
	keys, values, closeAfter := t.keys, t.values, t.closeAfter.Milliseconds()
	out := addOp(Stream[Windowed[K], change[V]]{b: b, node: t.changes}, "suppress", func(tk *task, name string, out fanout[Windowed[K], change[V]]) kvReceiver[Windowed[K], change[V]] {
		return kvFunc[Windowed[K], change[V]](func(rec Record, w Windowed[K], c change[V]) error {
			st := tk.ctx.Store(storeName)
			if st == nil {
				return tk.fail(name, fmt.Errorf("the runtime gave no store %q", storeName))
			}
			storeErr := func(what string, err error) error {
				return tk.fail(name, fmt.Errorf("store %q: %s: %w", storeName, what, err))
			}
			// The aggregation's stream time moves only with records
			// that update a window, so the record that moves it is
			// here with it as its time: nothing closes at an older one
			// that has not closed before.
			now := rec.Timestamp.UnixMilli()
			wb, err := keys.Encode(w)
			if err != nil {
				return tk.fail(name, fmt.Errorf("encode key for store %q: %w", storeName, err))
			}
			key := suppressKey(w.End.UnixMilli()+closeAfter, wb)
			if c.hasNew {
				vb, err := values.Encode(c.new)
				if err != nil {
					return tk.fail(name, fmt.Errorf("encode value for store %q: %w", storeName, err))
				}
				if err := st.Put(key, vb); err != nil {
					return storeErr("put", err)
				}
			} else if err := st.Delete(key); err != nil {
				return storeErr("delete", err)
			}
			// Send on and delete every window closed at now, in the
			// order they closed.
			var sendErr error
			err = st.Iterate(nil, suppressKey(now+1, nil), func(k, vb []byte) error {
				w, err := keys.Decode(k[8:])
				if err != nil {
					sendErr = tk.fail(name, fmt.Errorf("%w: store %q: key %q: %w", ErrDecode, storeName, k, err))
					return sendErr
				}
				v, err := values.Decode(vb)
				if err != nil {
					sendErr = tk.fail(name, fmt.Errorf("%w: store %q: value of window %v: %w", ErrDecode, storeName, w, err))
					return sendErr
				}
				if err := st.Delete(k); err != nil {
					return err
				}
				if err := out.emit(rec, w, change[V]{new: v, hasNew: true}); err != nil {
					sendErr = err
					return err
				}
				return nil
			})
			if sendErr != nil {
				return sendErr
			}
			if err != nil {
				return storeErr("send closed windows", err)
			}
			return nil
		})
	})
	b.AddStore(storeName, out.node)
	b.markStore(storeName, InternalStore)
	return Table[Windowed[K], V]{b: b, changes: out.node, keys: keys, values: values, windowed: true, closeAfter: t.closeAfter}
}

// The layout of a suppression buffer:
//
//	[closes at, 8][encoded windowed key]    -> the window's latest value, encoded
//
// "Closes at" is the first stream time at which the window is closed, in
// milliseconds, big-endian with the sign bit flipped: the windows closed
// at stream time t are one key range, from the store's first key to the
// first key of t+1, in the order they closed.

func suppressKey(closesAt int64, wb []byte) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(wb)), uint64(closesAt)^(1<<63))
	return append(b, wb...)
}
