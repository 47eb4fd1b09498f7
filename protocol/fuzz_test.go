package protocol

import (
	"errors"
	"reflect"
	"testing"
)

func FuzzDecodeSubscription(f *testing.F) {
	f.Add(readGolden(f, "testdata/subscription_v1.golden"))
	f.Add(readGolden(f, "testdata/subscription_v2.golden"))
	f.Add(mustMarshal(f, Subscription{InstanceID: "a", Capacity: 1}))
	f.Add(newer(mustMarshal(f, sampleSubscription()), CurrentVersion+1, 1, 2))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeSubscription(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnsupportedVersion) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		b, err := s.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded %+v but cannot encode it: %v", s, err)
		}
		s2, err := DecodeSubscription(b)
		if err != nil {
			t.Fatalf("re-encoded bytes do not decode: %v", err)
		}
		if !reflect.DeepEqual(s, s2) {
			t.Fatalf("round trip changed the value\nfirst  %+v\nsecond %+v", s, s2)
		}
		if string(b) != string(data) {
			t.Fatalf("a valid payload has a second encoding:\nin  %x\nout %x", data, b)
		}
	})
}

func FuzzDecodeAssignment(f *testing.F) {
	f.Add(readGolden(f, "testdata/assignment_v1.golden"))
	f.Add(readGolden(f, "testdata/assignment_v2.golden"))
	f.Add(mustMarshal(f, Assignment{}))
	f.Add(newer(mustMarshal(f, sampleAssignment()), CurrentVersion+1, 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := DecodeAssignment(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnsupportedVersion) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		b, err := a.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded %+v but cannot encode it: %v", a, err)
		}
		a2, err := DecodeAssignment(b)
		if err != nil {
			t.Fatalf("re-encoded bytes do not decode: %v", err)
		}
		if !reflect.DeepEqual(a, a2) {
			t.Fatalf("round trip changed the value\nfirst  %+v\nsecond %+v", a, a2)
		}
		if string(b) != string(data) {
			t.Fatalf("a valid payload has a second encoding:\nin  %x\nout %x", data, b)
		}
	})
}
