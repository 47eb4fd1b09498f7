package versus

import (
	"strings"
	"testing"
)

func TestPrintRestored(t *testing.T) {
	n := int64(850)
	res := &Result{Runs: []Run{
		{Configuration: "baton-smooth", Event: "scale-out", Figures: EventFigures{Restored: &n}},
		{Configuration: "goka", Event: "scale-out"},
		{Configuration: "x", Event: "scale-out", Unsupported: "no standbys"},
	}}
	var b strings.Builder
	if err := Print(&b, res); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	header := strings.Fields(lines[1])
	if len(header) < 2 || header[len(header)-2] != "restored" {
		t.Fatalf("header %q: want restored before counts", lines[1])
	}
	if !strings.Contains(lines[2], " 850 ") || !strings.Contains(lines[3], "not observed") {
		t.Fatalf("rows:\n%s\n%s", lines[2], lines[3])
	}
}
