package main

import (
	"encoding/json"
	"strings"
	"testing"
)

const seedScenario1 = `{
  "config": {"standbys": 0, "max_learners": 2, "acceptable_lag": 100},
  "tasks": [{"id": "T1"}, {"id": "T2"}, {"id": "T3"}, {"id": "T4"}, {"id": "T5"}],
  "instances": [
    {"id": "S1", "active": ["T1", "T2"], "lag": {"T1": 0, "T2": 0}},
    {"id": "S2", "active": ["T3", "T4"], "lag": {"T3": 0, "T4": 0}},
    {"id": "S3", "active": ["T5"], "lag": {"T5": 0}},
    {"id": "S4"}
  ]
}`

func TestAssignCommand(t *testing.T) {
	out, errOut, code := runBaton(t, seedScenario1, "assign")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var plan struct {
		Instances []struct {
			ID      string   `json:"id"`
			Active  []string `json:"active"`
			Standby []string `json:"standby"`
			Learner []string `json:"learner"`
			Revoked []string `json:"revoked"`
		} `json:"instances"`
		Followup bool `json:"followup"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("stdout is not a plan: %v\n%s", err, out)
	}
	if len(plan.Instances) != 4 || plan.Instances[3].ID != "S4" || len(plan.Instances[3].Learner) != 1 || plan.Followup {
		t.Errorf("want S4 to get one learner and no follow-up, got %s", out)
	}
	for _, in := range plan.Instances {
		if in.Standby == nil || in.Revoked == nil {
			t.Errorf("instance %s: lists must be present (empty, not null): %s", in.ID, out)
		}
	}
	// Same input, same bytes; every policy answers.
	again, _, _ := runBaton(t, seedScenario1, "assign", "--policy", "smooth")
	if again != out {
		t.Error("output differs between two runs")
	}
	for _, p := range []string{"cooperative", "eager"} {
		if _, e, code := runBaton(t, seedScenario1, "assign", "--policy", p); code != 0 {
			t.Errorf("--policy %s: exit %d: %s", p, code, e)
		}
	}
}

func TestAssignCommandRejectsBadInput(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"not json", "hello", "(document)"},
		{"empty", "", "(document)"},
		{"capacity", `{"instances":[{"id":"A","capacity":0}]}`, "instances[0].capacity"},
		{"negative lag", `{"tasks":[{"id":"0_0"}],"instances":[{"id":"A","lag":{"0_0":-1}}]}`, "lag"},
		{"unknown task", `{"instances":[{"id":"A","active":["0_0"]}]}`, "instances[0].active[0]"},
		{"task twice", `{"tasks":[{"id":"0_0"},{"id":"0_0"}]}`, "tasks[1].id"},
		{"wrong type", `{"tasks":[{"id":7}]}`, "tasks.id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := runBaton(t, c.in, "assign")
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if out != "" {
				t.Errorf("stdout must be empty, got %q", out)
			}
			if strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, c.want) {
				t.Errorf("stderr %q: want one line naming %q", errOut, c.want)
			}
		})
	}
	if _, errOut, code := runBaton(t, seedScenario1, "assign", "--policy", "fastest"); code != 2 || !strings.Contains(errOut, "--policy") {
		t.Errorf("unknown policy: exit %d, stderr %q", code, errOut)
	}
}

func TestAssignExplain(t *testing.T) {
	out, _, code := runBaton(t, seedScenario1, "assign", "--explain")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"learner", "T1", "S4", "above its share", "S1"} {
		if !strings.Contains(out, want) {
			t.Errorf("explanation lacks %q:\n%s", want, out)
		}
	}
}
