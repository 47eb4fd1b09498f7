package protocol

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// Smallest encodings, used to bound a count against the bytes left before
// allocating anything for it.
const (
	minTaskLen = 2 + 1          // length prefix and a non-empty id
	minLagLen  = minTaskLen + 8 // task id and int64 lag
	minLoadLen = minTaskLen + 4 // task id and int32 load
)

// reader decodes big-endian fields from b. The first failure sticks: later
// reads return zero values, and err says which field failed and where.
type reader struct {
	msg string // "subscription" or "assignment", for errors
	b   []byte
	off int
	err error
}

// fail records the first error: the field (with its list index when
// index >= 0) that starts at byte offset at.
func (r *reader) fail(at int, field string, index int, format string, args ...any) {
	if r.err != nil {
		return
	}
	if index >= 0 {
		field = fmt.Sprintf("%s[%d]", field, index)
	}
	r.err = fmt.Errorf("%w: %s field %s at offset %d: %s", ErrMalformed, r.msg, field, at, fmt.Sprintf(format, args...))
}

func (r *reader) remaining() int { return len(r.b) - r.off }

func (r *reader) need(field string, index, n int) bool {
	if r.err != nil {
		return false
	}
	if r.remaining() < n {
		r.fail(r.off, field, index, "need %d bytes, %d remain", n, r.remaining())
		return false
	}
	return true
}

func (r *reader) int8(field string) int8 {
	if !r.need(field, -1, 1) {
		return 0
	}
	v := int8(r.b[r.off])
	r.off++
	return v
}

func (r *reader) int16(field string) int16 {
	if !r.need(field, -1, 2) {
		return 0
	}
	v := int16(binary.BigEndian.Uint16(r.b[r.off:]))
	r.off += 2
	return v
}

func (r *reader) int32(field string) int32 {
	if !r.need(field, -1, 4) {
		return 0
	}
	v := int32(binary.BigEndian.Uint32(r.b[r.off:]))
	r.off += 4
	return v
}

func (r *reader) int64(field string, index int) int64 {
	if !r.need(field, index, 8) {
		return 0
	}
	v := int64(binary.BigEndian.Uint64(r.b[r.off:]))
	r.off += 8
	return v
}

func (r *reader) string(field string, index int) string {
	if !r.need(field, index, 2) {
		return ""
	}
	n := int(int16(binary.BigEndian.Uint16(r.b[r.off:])))
	if n < 0 {
		r.fail(r.off, field, index, "negative string length %d", n)
		return ""
	}
	if r.remaining()-2 < n {
		r.fail(r.off, field, index, "string length %d exceeds the %d bytes that remain", n, r.remaining()-2)
		return ""
	}
	r.off += 2
	s := string(r.b[r.off : r.off+n])
	r.off += n
	return s
}

// count reads a list length and checks that count elements of at least
// minLen bytes each fit in what remains, so garbage cannot make the
// decoder allocate more than the input's size.
func (r *reader) count(field string, minLen int) int {
	at := r.off
	n := r.int32(field + " count")
	if r.err != nil {
		return 0
	}
	if n < 0 {
		r.fail(at, field+" count", -1, "negative count %d", n)
		return 0
	}
	if int64(n)*int64(minLen) > int64(r.remaining()) {
		r.fail(at, field+" count", -1, "count %d needs at least %d bytes, %d remain", n, int64(n)*int64(minLen), r.remaining())
		return 0
	}
	return int(n)
}

// taskList reads a list of non-empty task ids in strictly ascending order.
func (r *reader) taskList(field string) []string {
	n := r.count(field, minTaskLen)
	if n == 0 {
		return nil
	}
	out := make([]string, 0, n)
	for i := range n {
		at := r.off
		t := r.string(field, i)
		if r.err != nil {
			return nil
		}
		if t == "" {
			r.fail(at, field, i, "empty task id")
			return nil
		}
		if i > 0 && t <= out[i-1] {
			r.fail(at, field, i, "task %q is not after %q: lists are sorted and without duplicates", t, out[i-1])
			return nil
		}
		out = append(out, t)
	}
	return out
}

// lags reads (task id, lag) pairs in strictly ascending task order.
func (r *reader) lags(field string) map[string]int64 {
	return taskValues(r, field, "lags", minLagLen, func(i int) int64 { return r.int64(field, i) }, func(lag int64, t string) string {
		if lag < 0 {
			return fmt.Sprintf("negative lag %d for task %q", lag, t)
		}
		return ""
	})
}

// loads reads (task id, load) pairs in strictly ascending task order.
func (r *reader) loads(field string) map[string]int32 {
	return taskValues(r, field, "loads", minLoadLen, func(int) int32 { return r.int32(field) }, func(load int32, t string) string {
		if load < 1 {
			return fmt.Sprintf("load %d for task %q is below 1", load, t)
		}
		return ""
	})
}

// taskValues reads a list of (task id, value) pairs in strictly ascending
// task order, each at least minLen bytes: value reads one value, and bad
// says what is wrong with it ("" if nothing). what names the list in
// errors.
func taskValues[T any](r *reader, field, what string, minLen int, value func(i int) T, bad func(v T, task string) string) map[string]T {
	n := r.count(field, minLen)
	if n == 0 {
		return nil
	}
	out := make(map[string]T, n)
	prev := ""
	for i := range n {
		at := r.off
		t := r.string(field, i)
		if r.err != nil {
			return nil
		}
		if t == "" {
			r.fail(at, field, i, "empty task id")
			return nil
		}
		if i > 0 && t <= prev {
			r.fail(at, field, i, "task %q is not after %q: %s are sorted by task and without duplicates", t, prev, what)
			return nil
		}
		at = r.off
		v := value(i)
		if r.err != nil {
			return nil
		}
		if msg := bad(v, t); msg != "" {
			r.fail(at, field, i, "%s", msg)
			return nil
		}
		out[t] = v
		prev = t
	}
	return out
}

// header reads the version pair every payload starts with.
func (r *reader) header() (version, latest int16) {
	version = r.int16("version")
	if r.err != nil {
		return 0, 0
	}
	if version < 1 {
		r.fail(0, "version", -1, "version %d is not a baton version (first is 1)", version)
		return 0, 0
	}
	latest = r.int16("latest supported version")
	if r.err == nil && latest < version {
		r.fail(2, "latest supported version", -1, "%d is below the payload's version %d", latest, version)
	}
	return version, latest
}

// flags reads an int8 of bit flags and rejects bits outside known, unless
// the payload is newer than this build (a newer version may define them).
func (r *reader) flags(version int16, known int8) int8 {
	f := r.int8("flags")
	if r.err == nil && version <= CurrentVersion && f&^known != 0 {
		r.fail(r.off-1, "flags", -1, "unknown flag bits %#02x", uint8(f&^known))
	}
	return f
}

// finish is called after the fields of the versions this build knows.
// A payload at a known version must end there; a newer one may carry more.
func (r *reader) finish(version, latest int16) error {
	if r.err != nil {
		return r.err
	}
	if version > CurrentVersion {
		return &UnsupportedVersionError{Message: r.msg, Version: version, LatestSupported: latest}
	}
	if r.remaining() != 0 {
		r.fail(r.off, "end", -1, "%d unexpected trailing bytes after a version %d %s", r.remaining(), version, r.msg)
		return r.err
	}
	return nil
}

// Encoding helpers. Values are validated before anything is written.

func invalid(msg, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, msg, fmt.Sprintf(format, args...))
}

// encodeVersions resolves the zero values of Version and
// LatestSupportedVersion to CurrentVersion and checks the pair.
func encodeVersions(msg string, version, latest int16) (int16, int16, error) {
	if version == 0 {
		version = CurrentVersion
	}
	if latest == 0 {
		latest = max(CurrentVersion, version)
	}
	if version < 1 || version > CurrentVersion {
		return 0, 0, invalid(msg, "cannot encode version %d (this build writes 1 to %d)", version, CurrentVersion)
	}
	if latest < version {
		return 0, 0, invalid(msg, "latest supported version %d is below version %d", latest, version)
	}
	return version, latest, nil
}

func checkString(msg, field, s string) error {
	if len(s) > math.MaxInt16 {
		return invalid(msg, "%s is %d bytes, longer than %d", field, len(s), math.MaxInt16)
	}
	return nil
}

// sortedTasks returns a sorted copy of tasks, checking each id.
func sortedTasks(msg, field string, tasks []string) ([]string, error) {
	if len(tasks) > math.MaxInt32 {
		return nil, invalid(msg, "%s has %d tasks", field, len(tasks))
	}
	out := slices.Clone(tasks)
	slices.Sort(out)
	for i, t := range out {
		if t == "" {
			return nil, invalid(msg, "%s has an empty task id", field)
		}
		if err := checkString(msg, field+" task id", t); err != nil {
			return nil, err
		}
		if i > 0 && t == out[i-1] {
			return nil, invalid(msg, "%s lists task %q twice", field, t)
		}
	}
	return out, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func appendTasks(b []byte, tasks []string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(tasks)))
	for _, t := range tasks {
		b = appendString(b, t)
	}
	return b
}
