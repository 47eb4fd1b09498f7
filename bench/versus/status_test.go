package versus

import (
	"strings"
	"testing"
)

func TestParseStatusLine(t *testing.T) {
	if _, ok, err := ParseStatusLine("http: listening on 127.0.0.1:1"); ok || err != nil {
		t.Fatalf("a plain line: ok %v err %v", ok, err)
	}
	s, ok, err := ParseStatusLine(`{"engine":"kstreams","instance":"b","time_ms":5,"state":"RUNNING","active":["0_1"],"standby":[],"warmup":[],"processed":12}`)
	if !ok || err != nil || s.Instance != "b" || s.Processed != 12 || len(s.Active) != 1 {
		t.Fatalf("got %+v ok %v err %v", s, ok, err)
	}
	if s.Restored != nil {
		t.Fatalf("a line without restored: restored %d, want not observed", *s.Restored)
	}
	if s.Process != "" {
		t.Fatalf("a line without process: process %q", s.Process)
	}
	s, ok, err = ParseStatusLine(`{"engine":"kstreams","instance":"b","process":"1f3d9a10-aaaa-4000-8000-000000000001"}`)
	if !ok || err != nil || s.Process != "1f3d9a10-aaaa-4000-8000-000000000001" {
		t.Fatalf("process: got %+v ok %v err %v", s, ok, err)
	}
	if s.RestoreMS != nil {
		t.Fatalf("a line without restore_ms: %d", *s.RestoreMS)
	}
	if s, _, err = ParseStatusLine(`{"engine":"goka","instance":"b","restore_ms":-1}`); err != nil || s.RestoreMS != nil {
		t.Fatalf("restore_ms -1: got %+v err %v, want not observed", s, err)
	}
	if _, _, err = ParseStatusLine(`{"engine":"goka","instance":"b","restore_ms":-5}`); err == nil || !strings.Contains(err.Error(), "restore_ms") {
		t.Fatalf("restore_ms -5: err %v, want one naming restore_ms", err)
	}
	s, ok, err = ParseStatusLine(`{"engine":"kstreams","instance":"b","restored":0}`)
	if !ok || err != nil || s.Restored == nil || *s.Restored != 0 {
		t.Fatalf("restored 0: got %+v ok %v err %v", s, ok, err)
	}
	s, ok, err = ParseStatusLine(`{"engine":"goka","instance":"b","restored":-1}`)
	if !ok || err != nil || s.Restored != nil {
		t.Fatalf("restored -1: got %+v ok %v err %v, want not observed", s, ok, err)
	}
	if _, _, err := ParseStatusLine(`{"engine":"x","instance":"b","restored":-2}`); err == nil || !strings.Contains(err.Error(), "restored") {
		t.Fatalf("restored -2: err %v, want one naming restored", err)
	}
	if _, _, err := ParseStatusLine(`{"engine":"x"}`); err == nil {
		t.Fatal("a line without instance: no error")
	}
	if _, _, err := ParseStatusLine(`{"engine":`); err == nil {
		t.Fatal("broken JSON: no error")
	}
}
