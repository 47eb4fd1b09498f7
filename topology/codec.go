package topology

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// Codec turns values of type T into bytes and back: record keys and values
// on topics, and keys and values in stores. Decode gets bytes from the
// network or disk, so it must return an error, not panic, on bad input,
// and must not keep the slice (it is the runtime's; see Record).
type Codec[T any] interface {
	Encode(T) ([]byte, error)
	Decode([]byte) (T, error)
}

// The codecs of common types.
var (
	// String is the bytes of the string as is (UTF-8 by convention; not
	// checked, as Go strings may hold any bytes).
	String Codec[string] = stringCodec{}
	// Bytes is the bytes as is; Decode copies them, and a nil slice
	// (Kafka's null) decodes as nil.
	Bytes Codec[[]byte] = bytesCodec{}
	// Int64 is the decimal ASCII text of the number, e.g. "42" or "-7",
	// readable with kcat and any client. It is what wordcount writes.
	Int64 Codec[int64] = int64Codec{}
)

type stringCodec struct{}

func (stringCodec) Encode(s string) ([]byte, error) { return []byte(s), nil }
func (stringCodec) Decode(b []byte) (string, error) { return string(b), nil }

type bytesCodec struct{}

func (bytesCodec) Encode(b []byte) ([]byte, error) { return b, nil }
func (bytesCodec) Decode(b []byte) ([]byte, error) { return bytes.Clone(b), nil }

type int64Codec struct{}

func (int64Codec) Encode(v int64) ([]byte, error) { return strconv.AppendInt(nil, v, 10), nil }

func (int64Codec) Decode(b []byte) (int64, error) {
	if len(b) > 20 { // more than any int64; keeps the error message short
		return 0, errors.New("not a decimal int64: too long")
	}
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, errors.New("not a decimal int64: " + strconv.Quote(string(b)))
	}
	return v, nil
}

// JSON is the codec of T as JSON (encoding/json).
type JSON[T any] struct{}

// Encode marshals v.
func (JSON[T]) Encode(v T) ([]byte, error) { return json.Marshal(v) }

// Decode unmarshals b into a new T.
func (JSON[T]) Decode(b []byte) (T, error) {
	var v T
	err := json.Unmarshal(b, &v)
	return v, err
}
