package protocol

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current encoder")

func sampleSubscription() Subscription {
	return Subscription{
		InstanceID: "i-1",
		Endpoint:   "127.0.0.1:8080",
		Rack:       "r1",
		Capacity:   4,
		Leaving:    true,
		Active:     []string{"1_3", "0_1"},
		Standby:    []string{"0_2"},
		Learner:    []string{"1_0"},
		Lags:       map[string]int64{"0_1": 0, "0_2": 17, "1_0": 70000},
		Loads:      map[string]int32{"1_3": 2500, "0_1": 500},
	}
}

func sampleAssignment() Assignment {
	return Assignment{
		Followup: true,
		Active:   []string{"1_3", "0_1"},
		Standby:  []string{"0_2"},
		Learner:  []string{"1_0"},
		Revoked:  []string{"1_3"},
	}
}

func mustMarshal(t testing.TB, v interface{ MarshalBinary() ([]byte, error) }) []byte {
	t.Helper()
	b, err := v.MarshalBinary()
	if err != nil {
		t.Fatalf("marshal %+v: %v", v, err)
	}
	return b
}

// golden compares got with testdata/name, a hex dump 16 bytes a line,
// or rewrites the file under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		var sb strings.Builder
		for i := 0; i < len(got); i += 16 {
			sb.WriteString(hex.EncodeToString(got[i:min(i+16, len(got))]))
			sb.WriteByte('\n')
		}
		if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := readGolden(t, path)
	if !bytes.Equal(got, want) {
		t.Errorf("%s: encoding changed; a layout change needs a new version (run with -update only if the old bytes were wrong)\ngot  %x\nwant %x", path, got, want)
	}
}

func readGolden(t testing.TB, path string) []byte {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	b, err := hex.DecodeString(strings.Join(strings.Fields(string(text)), ""))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return b
}

func TestGoldenSubscription(t *testing.T) {
	for _, version := range []int16{1, 2} {
		name := fmt.Sprintf("subscription_v%d.golden", version)
		s := sampleSubscription()
		s.Version, s.LatestSupportedVersion = version, version
		golden(t, name, mustMarshal(t, s))
		got, err := DecodeSubscription(readGolden(t, "testdata/"+name))
		if err != nil {
			t.Fatal(err)
		}
		want := sampleSubscription()
		want.Version, want.LatestSupportedVersion = version, version
		want.Active = []string{"0_1", "1_3"}
		if version < 2 {
			want.Loads = nil // version 1 has no loads
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("decoded %s\n got %+v\nwant %+v", name, got, want)
		}
	}
}

func TestGoldenAssignment(t *testing.T) {
	for _, version := range []int16{1, 2} {
		name := fmt.Sprintf("assignment_v%d.golden", version)
		a := sampleAssignment()
		a.Version, a.LatestSupportedVersion = version, version
		golden(t, name, mustMarshal(t, a))
		got, err := DecodeAssignment(readGolden(t, "testdata/"+name))
		if err != nil {
			t.Fatal(err)
		}
		want := sampleAssignment()
		want.Version, want.LatestSupportedVersion = version, version
		want.Active = []string{"0_1", "1_3"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("decoded %s\n got %+v\nwant %+v", name, got, want)
		}
	}
}

// TestLayoutByHand pins the v1 layout independently of the encoder: the
// golden files alone would accept any self-consistent change.
func TestLayoutByHand(t *testing.T) {
	var w []byte
	be := binary.BigEndian
	str := func(s string) { w = be.AppendUint16(w, uint16(len(s))); w = append(w, s...) }
	w = be.AppendUint16(w, 1)
	w = be.AppendUint16(w, 1)
	str("a")
	str("")
	str("")
	w = be.AppendUint32(w, 2)
	w = append(w, 0)
	w = be.AppendUint32(w, 1)
	str("0_0")
	w = be.AppendUint32(w, 0)
	w = be.AppendUint32(w, 0)
	w = be.AppendUint32(w, 1)
	str("0_0")
	w = be.AppendUint64(w, 5)
	sub := Subscription{Version: 1, LatestSupportedVersion: 1, InstanceID: "a", Capacity: 2, Active: []string{"0_0"}, Lags: map[string]int64{"0_0": 5},
		Loads: map[string]int32{"0_0": 300}}
	got := mustMarshal(t, sub)
	if !bytes.Equal(got, w) {
		t.Fatalf("subscription layout, version 1 (loads left out)\n got %x\nwant %x", got, w)
	}

	// Version 2 is version 1 with its version fields set to 2, followed
	// by the loads.
	w[1], w[3] = 2, 2
	w = be.AppendUint32(w, 1)
	str("0_0")
	w = be.AppendUint32(w, 300)
	sub.Version, sub.LatestSupportedVersion = 2, 2
	got = mustMarshal(t, sub)
	if !bytes.Equal(got, w) {
		t.Fatalf("subscription layout, version 2\n got %x\nwant %x", got, w)
	}

	w = w[:0]
	w = be.AppendUint16(w, 2)
	w = be.AppendUint16(w, 2)
	w = append(w, byte(ErrorVersionProbing), 0)
	w = be.AppendUint32(w, 0)
	w = be.AppendUint32(w, 0)
	w = be.AppendUint32(w, 1)
	str("2_9")
	w = be.AppendUint32(w, 0)
	got = mustMarshal(t, Assignment{Error: ErrorVersionProbing, Learner: []string{"2_9"}})
	if !bytes.Equal(got, w) {
		t.Fatalf("assignment layout\n got %x\nwant %x", got, w)
	}
}

func TestDeterministicEncoding(t *testing.T) {
	a := sampleSubscription()
	b := sampleSubscription()
	b.Active = []string{"0_1", "1_3"}
	b.Lags = map[string]int64{"1_0": 70000, "0_2": 17, "0_1": 0}
	for range 20 { // map iteration order varies run to run
		if x, y := mustMarshal(t, a), mustMarshal(t, b); !bytes.Equal(x, y) {
			t.Fatalf("same value, different bytes:\n%x\n%x", x, y)
		}
	}
	if a.Active[0] != "1_3" {
		t.Errorf("encoding reordered the caller's slice: %v", a.Active)
	}
}

// randomSubscription and randomAssignment build valid values from r.
func randomTasks(r *rand.Rand) []string {
	seen := map[string]bool{}
	var out []string
	for range r.IntN(6) {
		t := fmt.Sprintf("%d_%d", r.IntN(3), r.IntN(40))
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

func randomSubscription(r *rand.Rand) Subscription {
	s := Subscription{
		InstanceID: fmt.Sprintf("instance-%d", r.IntN(1000)),
		Capacity:   1 + r.Int32N(16),
		Leaving:    r.IntN(2) == 0,
		Active:     randomTasks(r),
		Standby:    randomTasks(r),
		Learner:    randomTasks(r),
	}
	for _, t := range randomTasks(r) {
		if s.Loads == nil {
			s.Loads = map[string]int32{}
		}
		s.Loads[t] = 1 + r.Int32N(20000)
	}
	if r.IntN(2) == 0 {
		s.Endpoint = fmt.Sprintf("10.0.0.%d:%d", r.IntN(255), r.IntN(65536))
		s.Rack = fmt.Sprintf("rack-%d", r.IntN(3))
	}
	for _, t := range randomTasks(r) {
		if s.Lags == nil {
			s.Lags = map[string]int64{}
		}
		s.Lags[t] = r.Int64N(1 << 40)
	}
	return s
}

func randomAssignment(r *rand.Rand) Assignment {
	return Assignment{
		Error:    ErrorCode(r.IntN(2)),
		Followup: r.IntN(2) == 0,
		Active:   randomTasks(r),
		Standby:  randomTasks(r),
		Learner:  randomTasks(r),
		Revoked:  randomTasks(r),
	}
}

func sorted(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	c := append([]string(nil), s...)
	for i := range c {
		for j := i + 1; j < len(c); j++ {
			if c[j] < c[i] {
				c[i], c[j] = c[j], c[i]
			}
		}
	}
	return c
}

func TestRoundTripRandom(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	for i := range 2000 {
		s := randomSubscription(r)
		got, err := DecodeSubscription(mustMarshal(t, s))
		if err != nil {
			t.Fatalf("seed %d case %d: %v", seed, i, err)
		}
		want := s
		want.Version, want.LatestSupportedVersion = CurrentVersion, CurrentVersion
		want.Active, want.Standby, want.Learner = sorted(s.Active), sorted(s.Standby), sorted(s.Learner)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d case %d: subscription round trip\n got %+v\nwant %+v", seed, i, got, want)
		}

		a := randomAssignment(r)
		gotA, err := DecodeAssignment(mustMarshal(t, a))
		if err != nil {
			t.Fatalf("seed %d case %d: %v", seed, i, err)
		}
		wantA := a
		wantA.Version, wantA.LatestSupportedVersion = CurrentVersion, CurrentVersion
		wantA.Active, wantA.Standby, wantA.Learner, wantA.Revoked = sorted(a.Active), sorted(a.Standby), sorted(a.Learner), sorted(a.Revoked)
		if !reflect.DeepEqual(gotA, wantA) {
			t.Fatalf("seed %d case %d: assignment round trip\n got %+v\nwant %+v", seed, i, gotA, wantA)
		}
	}
}

func TestTruncatedIsMalformed(t *testing.T) {
	for name, full := range map[string][]byte{
		"subscription": mustMarshal(t, sampleSubscription()),
		"assignment":   mustMarshal(t, sampleAssignment()),
	} {
		for n := range len(full) {
			var err error
			if name == "subscription" {
				_, err = DecodeSubscription(full[:n])
			} else {
				_, err = DecodeAssignment(full[:n])
			}
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("%s truncated to %d of %d bytes: err = %v, want ErrMalformed", name, n, len(full), err)
			}
		}
	}
}

// patch returns a copy of b with p written at off.
func patch(b []byte, off int, p ...byte) []byte {
	c := append([]byte(nil), b...)
	copy(c[off:], p)
	return c
}

func TestMalformedSubscription(t *testing.T) {
	good := mustMarshal(t, Subscription{Version: 1, InstanceID: "a", Capacity: 2, Active: []string{"0_0", "0_1"}, Lags: map[string]int64{"0_0": 5}})
	// Offsets in good: 0 version, 2 latest, 4 id "a", 7 endpoint, 9 rack,
	// 11 capacity, 15 flags, 16 active count, 20 "0_0", 25 "0_1",
	// 30 standby count, 34 learner count, 38 lags count, 42 "0_0", 47 lag.
	if len(good) != 55 {
		t.Fatalf("layout changed: %d bytes; fix the offsets in this test", len(good))
	}
	cases := []struct {
		name string
		data []byte
		want string // in the error text
	}{
		{"empty", nil, "field version at offset 0"},
		{"version 0", patch(good, 0, 0, 0), "field version at offset 0: version 0"},
		{"negative version", patch(good, 0, 0xff, 0xff), "version -1"},
		{"latest below version", patch(good, 2, 0, 0), "field latest supported version at offset 2"},
		{"empty instance id", patch(good, 4, 0, 0, 0), "field instance id at offset 4: empty"},
		{"string longer than input", patch(good, 7, 0x7f, 0xff), "field endpoint at offset 7: string length 32767"},
		{"negative string length", patch(good, 9, 0x80, 0), "field rack at offset 9: negative string length"},
		{"capacity 0", patch(good, 11, 0, 0, 0, 0), "field capacity at offset 11"},
		{"unknown flag", patch(good, 15, 0x82), "field flags at offset 15: unknown flag bits 0x82"},
		{"huge count", patch(good, 16, 0x7f, 0xff, 0xff, 0xff), "field active count at offset 16: count 2147483647"},
		{"negative count", patch(good, 16, 0x80, 0, 0, 0), "field active count at offset 16: negative count"},
		{"unsorted", patch(good, 20, 0, 3, '1'), "field active[1] at offset 25"},
		{"duplicate", patch(good, 25, 0, 3, '0', '_', '0'), `field active[1] at offset 25: task "0_0" is not after "0_0"`},
		{"empty task", append(patch(good[:20], 16, 0, 0, 0, 1), make([]byte, 20)...), "field active[0] at offset 20: empty task id"},
		{"negative lag", patch(good, 47, 0xff), `field lags[0] at offset 47: negative lag`},
		{"trailing", append(append([]byte(nil), good...), 0), "field end at offset 55: 1 unexpected trailing bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := DecodeSubscription(c.data)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "subscription") {
				t.Errorf("err = %q, want it to contain %q", err, c.want)
			}
			if !reflect.DeepEqual(s, Subscription{}) {
				t.Errorf("malformed input returned a value: %+v", s)
			}
		})
	}
}

func TestMalformedLoads(t *testing.T) {
	good := mustMarshal(t, Subscription{Version: 2, InstanceID: "a", Capacity: 2, Active: []string{"0_0", "0_1"},
		Lags: map[string]int64{"0_0": 5}, Loads: map[string]int32{"0_0": 7, "0_1": 9}})
	// The version 1 layout of TestMalformedSubscription up to offset 55,
	// then 55 loads count, 59 "0_0", 64 its load, 68 "0_1", 73 its load.
	if len(good) != 77 {
		t.Fatalf("layout changed: %d bytes; fix the offsets in this test", len(good))
	}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"missing loads", good[:55], "field loads count at offset 55: need 4 bytes, 0 remain"},
		{"huge count", patch(good, 55, 0, 0, 0, 3), "field loads count at offset 55: count 3"},
		{"load 0", patch(good, 64, 0, 0, 0, 0), `field loads[0] at offset 64: load 0 for task "0_0" is below 1`},
		{"negative load", patch(good, 73, 0xff), `field loads[1] at offset 73: load -16777207`},
		{"duplicate", patch(good, 68, 0, 3, '0', '_', '0'), `field loads[1] at offset 68: task "0_0" is not after "0_0"`},
		{"trailing", append(append([]byte(nil), good...), 0), "field end at offset 77"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := DecodeSubscription(c.data)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ErrMalformed containing %q", err, c.want)
			}
			if !reflect.DeepEqual(s, Subscription{}) {
				t.Errorf("malformed input returned a value: %+v", s)
			}
		})
	}
	// The same bytes at version 1 end before the loads.
	v1 := patch(good[:55], 0, 0, 1, 0, 1)
	if s, err := DecodeSubscription(v1); err != nil || s.Loads != nil {
		t.Errorf("version 1 prefix: %+v, %v", s, err)
	}
}

func TestMalformedAssignment(t *testing.T) {
	good := mustMarshal(t, Assignment{Active: []string{"0_0"}})
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"unknown error code", patch(good, 4, 9), "field error code at offset 4: unknown error code 9"},
		{"unknown flag", patch(good, 5, 2), "field flags at offset 5"},
		{"huge count", patch(good, 6, 0, 1, 0, 0), "field active count at offset 6"},
		{"missing revoked", good[:len(good)-4], "field revoked count at offset 23: need 4 bytes, 0 remain"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeAssignment(c.data)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want ErrMalformed containing %q", err, c.want)
			}
		})
	}
}

// newer turns a current payload into one of version v that appends extra
// fields, as the compatibility rule allows.
func newer(b []byte, v int16, extra ...byte) []byte {
	c := patch(b, 0, byte(v>>8), byte(v), byte(v>>8), byte(v))
	return append(c, extra...)
}

func TestNewerVersionKeepsKnownFields(t *testing.T) {
	future := CurrentVersion + 1
	sub := sampleSubscription()
	data := newer(mustMarshal(t, sub), future, 0xde, 0xad, 0xbe, 0xef)
	const flagsAt = 4 + (2 + 3) + (2 + 14) + (2 + 2) + 4 // after id, endpoint, rack, capacity
	data[flagsAt] |= 0x40                                // a flag bit only the future defines
	got, err := DecodeSubscription(data)
	var ve *UnsupportedVersionError
	if !errors.As(err, &ve) || !errors.Is(err, ErrUnsupportedVersion) || errors.Is(err, ErrMalformed) {
		t.Fatalf("err = %v, want *UnsupportedVersionError", err)
	}
	if ve.Version != future || ve.LatestSupported != future || ve.Message != "subscription" {
		t.Errorf("error = %+v", ve)
	}
	if !strings.Contains(err.Error(), fmt.Sprint(future)) {
		t.Errorf("error %q does not name version %d", err, future)
	}
	want := sampleSubscription()
	want.Version, want.LatestSupportedVersion = future, future
	want.Active = []string{"0_1", "1_3"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("known fields of a newer subscription\n got %+v\nwant %+v", got, want)
	}
	if _, err := got.MarshalBinary(); !errors.Is(err, ErrInvalid) {
		t.Errorf("encoding at version %d: err = %v, want ErrInvalid", future, err)
	}

	gotA, err := DecodeAssignment(newer(patch(mustMarshal(t, sampleAssignment()), 4, 7), future, 1, 2, 3))
	if !errors.As(err, &ve) || ve.Version != future || ve.Message != "assignment" {
		t.Fatalf("err = %v, want *UnsupportedVersionError for the assignment", err)
	}
	if gotA.Error != 7 || len(gotA.Active) != 2 || !gotA.Followup {
		t.Errorf("known fields of a newer assignment: %+v", gotA)
	}

	// A newer payload whose known prefix is broken is malformed, not newer.
	_, err = DecodeSubscription(newer(mustMarshal(t, sub), future)[:10])
	if !errors.Is(err, ErrMalformed) || errors.Is(err, ErrUnsupportedVersion) {
		t.Errorf("truncated newer payload: err = %v, want only ErrMalformed", err)
	}
}

func TestNegotiate(t *testing.T) {
	if v, c := Negotiate(CurrentVersion); v != CurrentVersion || c != ErrorNone {
		t.Errorf("Negotiate(current) = %d, %v", v, c)
	}
	if v, c := Negotiate(CurrentVersion + 3); v != CurrentVersion || c != ErrorVersionProbing {
		t.Errorf("Negotiate(newer) = %d, %v", v, c)
	}
	// A probing reply is encodable and readable by the newer member.
	v, c := Negotiate(CurrentVersion + 1)
	b := mustMarshal(t, Assignment{Version: v, Error: c})
	if a, err := DecodeAssignment(b); err != nil || a.Error != ErrorVersionProbing || a.LatestSupportedVersion != CurrentVersion {
		t.Errorf("probing reply decoded as %+v, %v", a, err)
	}
}

func TestEncodeInvalid(t *testing.T) {
	base := Subscription{InstanceID: "a", Capacity: 1}
	with := func(f func(*Subscription)) Subscription { s := base; f(&s); return s }
	cases := map[string]Subscription{
		"no instance id":   with(func(s *Subscription) { s.InstanceID = "" }),
		"capacity 0":       with(func(s *Subscription) { s.Capacity = 0 }),
		"duplicate task":   with(func(s *Subscription) { s.Standby = []string{"0_1", "0_0", "0_1"} }),
		"empty task":       with(func(s *Subscription) { s.Learner = []string{""} }),
		"negative lag":     with(func(s *Subscription) { s.Lags = map[string]int64{"0_0": -1} }),
		"empty lag task":   with(func(s *Subscription) { s.Lags = map[string]int64{"": 1} }),
		"load 0":           with(func(s *Subscription) { s.Loads = map[string]int32{"0_0": 0} }),
		"negative load":    with(func(s *Subscription) { s.Loads = map[string]int32{"0_0": -3} }),
		"empty load task":  with(func(s *Subscription) { s.Loads = map[string]int32{"": 1} }),
		"future version":   with(func(s *Subscription) { s.Version = CurrentVersion + 1 }),
		"negative version": with(func(s *Subscription) { s.Version = -1 }),
		"latest < version": with(func(s *Subscription) { s.Version, s.LatestSupportedVersion = 1, -1 }),
		"long rack":        with(func(s *Subscription) { s.Rack = strings.Repeat("x", 1<<15) }),
	}
	for name, s := range cases {
		if b, err := s.AppendBinary([]byte("keep")); !errors.Is(err, ErrInvalid) || string(b) != "keep" {
			t.Errorf("%s: AppendBinary = %q, %v; want the input back and ErrInvalid", name, b, err)
		}
	}
	for name, a := range map[string]Assignment{
		"error code":     {Error: 5},
		"duplicate task": {Revoked: []string{"1_1", "1_1"}},
	} {
		if _, err := a.MarshalBinary(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	// A member that downgraded after probing says so in LatestSupported.
	s := base
	s.Version, s.LatestSupportedVersion = 1, 9
	got, err := DecodeSubscription(mustMarshal(t, s))
	if err != nil || got.LatestSupportedVersion != 9 {
		t.Errorf("downgraded member: %+v, %v", got, err)
	}
}

func TestClone(t *testing.T) {
	s := sampleSubscription()
	c := s.Clone()
	c.Active[0] = "x"
	c.Lags["0_1"] = 99
	c.Loads["0_1"] = 99
	if s.Active[0] != "1_3" || s.Lags["0_1"] != 0 || s.Loads["0_1"] != 500 {
		t.Errorf("Clone shares memory with the original")
	}
}

func TestDecodeAllocationsBounded(t *testing.T) {
	// 16 bytes that claim two billion active tasks.
	data := mustMarshal(t, Subscription{InstanceID: "a", Capacity: 1})
	data = patch(data, 16, 0x7f, 0xff, 0xff, 0xff)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const runs = 100
	for range runs {
		if _, err := DecodeSubscription(data); !errors.Is(err, ErrMalformed) {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if perRun := (after.TotalAlloc - before.TotalAlloc) / runs; perRun > 4096 {
		t.Errorf("decoding %d bytes of garbage allocated %d bytes", len(data), perRun)
	}
}
