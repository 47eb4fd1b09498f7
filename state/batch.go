package state

import "slices"

// Batch collects puts and deletes for Store.Apply. The zero value is an
// empty batch. Put and Delete copy their arguments, so the caller may reuse
// its buffers at once. Operations apply in order; a later one on the same
// key wins. A Batch is not safe for concurrent use.
type Batch struct {
	buf []byte // keys and values, back to back
	ops []batchOp
}

type batchOp struct {
	del            bool
	keyEnd, valEnd int // key is buf[start:keyEnd], value buf[keyEnd:valEnd]
	start          int
}

// Put sets key to value. A nil value is stored as an empty value.
func (b *Batch) Put(key, value []byte) {
	start := len(b.buf)
	b.buf = append(b.buf, key...)
	keyEnd := len(b.buf)
	b.buf = append(b.buf, value...)
	b.ops = append(b.ops, batchOp{start: start, keyEnd: keyEnd, valEnd: len(b.buf)})
}

// Delete removes key; deleting a missing key is not an error.
func (b *Batch) Delete(key []byte) {
	start := len(b.buf)
	b.buf = append(b.buf, key...)
	b.ops = append(b.ops, batchOp{del: true, start: start, keyEnd: len(b.buf), valEnd: len(b.buf)})
}

// Grow makes room for ops more operations holding bytes more bytes of
// keys and values, so that adding them allocates nothing.
func (b *Batch) Grow(ops, bytes int) {
	b.buf = slices.Grow(b.buf, bytes)
	b.ops = slices.Grow(b.ops, ops)
}

// Len returns the number of operations in the batch.
func (b *Batch) Len() int {
	if b == nil {
		return 0
	}
	return len(b.ops)
}

// Reset empties the batch, keeping its memory.
func (b *Batch) Reset() {
	b.buf = b.buf[:0]
	b.ops = b.ops[:0]
}

// each calls fn for every operation in order. key and value alias the
// batch's buffer.
func (b *Batch) each(fn func(del bool, key, value []byte) error) error {
	if b == nil {
		return nil
	}
	for _, op := range b.ops {
		if err := fn(op.del, b.buf[op.start:op.keyEnd:op.keyEnd], b.buf[op.keyEnd:op.valEnd:op.valEnd]); err != nil {
			return err
		}
	}
	return nil
}
