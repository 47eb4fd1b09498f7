package topics

import (
	"errors"
	"strings"
	"testing"

	"github.com/baton-streams/baton/internal/errs"
)

func TestReplication(t *testing.T) {
	for _, c := range []struct {
		name             string
		rf, isr, brokers int
		wantRF, wantISR  int
		wantErr          string
	}{
		{"one broker", 0, 0, 1, 1, 1, ""},
		{"two brokers", 0, 0, 2, 2, 1, ""},
		{"three brokers", 0, 0, 3, 3, 2, ""},
		{"five brokers: at most three copies", 0, 0, 5, 3, 2, ""},
		{"factor set", 2, 0, 5, 2, 1, ""},
		{"both set", 3, 3, 5, 3, 3, ""},
		{"isr set above the default factor", 0, 4, 3, 0, 0, "min in-sync replicas: 4 exceeds the replication factor 3 (the default on a cluster of 3 brokers)"},
	} {
		rf, isr, err := Replication(c.rf, c.isr, c.brokers)
		if c.wantErr != "" {
			if !errors.Is(err, errs.ErrConfig) || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: got %v, want an invalid configuration saying %q", c.name, err, c.wantErr)
			}
			continue
		}
		if err != nil || rf != c.wantRF || isr != c.wantISR {
			t.Errorf("%s: got rf %d isr %d err %v, want rf %d isr %d", c.name, rf, isr, err, c.wantRF, c.wantISR)
		}
	}
}

func TestSinkConfigs(t *testing.T) {
	v := "compact"
	two := "2"
	got := sinkConfigs(map[string]*string{"cleanup.policy": &v}, 1)
	if *got["cleanup.policy"] != "compact" || *got["min.insync.replicas"] != "1" {
		t.Errorf("user configs with the default min.insync.replicas: %v", got)
	}
	if got := sinkConfigs(map[string]*string{"min.insync.replicas": &two}, 1); *got["min.insync.replicas"] != "2" {
		t.Errorf("the user's min.insync.replicas was replaced: %s", *got["min.insync.replicas"])
	}
}
