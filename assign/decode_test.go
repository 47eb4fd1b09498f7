package assign

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// specExample is the state.json example of docs/assign.md.
const specExample = `{
  "config": {"standbys": 1, "max_learners": 2, "acceptable_lag": 100},
  "tasks": [{"id": "0_0", "stateful": true, "load": 1.0}, {"id": "1_0", "stateful": false}],
  "instances": [{"id": "A", "capacity": 2, "rack": "zone-a", "leaving": false,
    "active": ["0_0"], "standby": [], "learner": [], "lag": {"0_0": 0}}]
}`

func TestDecodeDefaults(t *testing.T) {
	s, err := DecodeBytes([]byte(`{"tasks":[{"id":"0_0"}],"instances":[{"id":"A"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Config != DefaultConfig() {
		t.Errorf("config = %+v, want defaults %+v", s.Config, DefaultConfig())
	}
	if task := s.Tasks[0]; !task.Stateful || task.Load != 1 {
		t.Errorf("task defaults = %+v, want stateful with load 1", task)
	}
	if s.Instances[0].Capacity != 1 {
		t.Errorf("capacity default = %d, want 1", s.Instances[0].Capacity)
	}
	if _, err := DecodeBytes([]byte(specExample)); err != nil {
		t.Errorf("the spec's example: %v", err)
	}
	s, err = DecodeBytes([]byte(`{"config":{"separate_buckets":true}}`))
	if err != nil || !s.Config.SeparateBuckets {
		t.Errorf("separate_buckets: true decodes to %+v, %v", s.Config, err)
	}
}

func TestDecodeRejects(t *testing.T) {
	for _, c := range []struct{ name, doc, field string }{
		{"not json", `{"tasks": [`, "(document)"},
		{"not an object", `[1,2]`, "(document)"},
		{"trailing data", `{} {}`, "(document)"},
		{"wrong type", `{"instances":[{"id":"A","capacity":"two"}]}`, "instances.capacity"},
		{"wrong list type", `{"tasks":[{"id":"0_0"}],"instances":[{"id":"A","active":"0_0"}]}`, "instances.active"},
		{"unknown field", `{"tasks":[{"id":"0_0","weight":2}]}`, "weight"},
		{"task twice", `{"tasks":[{"id":"0_0"},{"id":"0_0"}]}`, "tasks[1].id"},
		{"task without id", `{"tasks":[{"stateful":true}]}`, "tasks[0].id"},
		{"empty task id", `{"tasks":[{"id":""}]}`, "tasks[0].id"},
		{"zero load", `{"tasks":[{"id":"0_0","load":0}]}`, "tasks[0].load"},
		{"negative load", `{"tasks":[{"id":"0_0","load":-1}]}`, "tasks[0].load"},
		{"unknown task", `{"tasks":[{"id":"0_0"}],"instances":[{"id":"A","standby":["9_9"]}]}`, "instances[0].standby[0]"},
		{"unknown task in lag", `{"tasks":[{"id":"0_0"}],"instances":[{"id":"A","lag":{"9_9":1}}]}`, `instances[0].lag["9_9"]`},
		{"capacity zero", `{"instances":[{"id":"A","capacity":0}]}`, "instances[0].capacity"},
		{"negative lag", `{"tasks":[{"id":"0_0"}],"instances":[{"id":"A","lag":{"0_0":-5}}]}`, `instances[0].lag["0_0"]`},
		{"instance twice", `{"instances":[{"id":"A"},{"id":"A"}]}`, "instances[1].id"},
		{"instance without id", `{"instances":[{"capacity":1}]}`, "instances[0].id"},
		{"two owners", `{"tasks":[{"id":"0_0"}],"instances":[{"id":"A","active":["0_0"]},{"id":"B","active":["0_0"]}]}`, "instances[1].active[0]"},
		{"two roles", `{"tasks":[{"id":"0_0"}],"instances":[{"id":"A","active":["0_0"],"standby":["0_0"]}]}`, "instances[0].standby[0]"},
		{"listed twice in a role", `{"tasks":[{"id":"0_0"}],"instances":[{"id":"A","learner":["0_0","0_0"]}]}`, "instances[0].learner[1]"},
		{"negative standbys", `{"config":{"standbys":-1}}`, "config.standbys"},
		{"max learners zero", `{"config":{"max_learners":0}}`, "config.max_learners"},
		{"negative acceptable lag", `{"config":{"acceptable_lag":-1}}`, "config.acceptable_lag"},
		{"fractional capacity", `{"instances":[{"id":"A","capacity":1.5}]}`, "instances.capacity"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeBytes([]byte(c.doc))
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrInvalidState) {
				t.Errorf("error %v does not wrap ErrInvalidState", err)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != c.field {
				t.Errorf("error %q names field %q, want %q", err, fieldOf(err), c.field)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is more than one line: %q", err)
			}
		})
	}
}

func fieldOf(err error) string {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe.Field
	}
	return ""
}

// FuzzDecode: no input makes the decoder or the assignor panic, and
// whatever the decoder accepts is valid and gives a plan that keeps the
// per-round guarantees.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(specExample))
	for seed := uint64(1); seed <= 8; seed++ {
		data, _ := json.Marshal(toWire(randomState(seed)))
		f.Add(data)
	}
	f.Add([]byte(`{"tasks":[{"id":"0_0"}],"instances":[{"id":"A","active":["0_0"]},{"id":"B","active":["0_0"]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeBytes(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidState) {
				t.Fatalf("error %v does not wrap ErrInvalidState", err)
			}
			return
		}
		if err := Validate(s); err != nil {
			t.Fatalf("decoded state fails validation: %v", err)
		}
		for _, p := range Policies {
			plan, err := Assign(s, p)
			if err != nil {
				t.Fatalf("policy %s: %v", p, err)
			}
			if p == Smooth {
				if err := Check(s, plan); err != nil {
					t.Fatalf("smooth plan breaks a guarantee: %v", err)
				}
			}
		}
	})
}

// toWire turns a State back into the JSON document form.
func toWire(s State) map[string]any {
	var tasks []map[string]any
	for _, t := range s.Tasks {
		tasks = append(tasks, map[string]any{"id": t.ID, "stateful": t.Stateful, "load": t.Load})
	}
	var insts []map[string]any
	for _, in := range s.Instances {
		insts = append(insts, map[string]any{"id": in.ID, "capacity": in.Capacity, "rack": in.Rack, "leaving": in.Leaving,
			"active": in.Active, "standby": in.Standby, "learner": in.Learner, "lag": in.Lag})
	}
	return map[string]any{"config": map[string]any{"standbys": s.Config.Standbys, "max_learners": s.Config.MaxLearners,
		"acceptable_lag": s.Config.AcceptableLag}, "tasks": tasks, "instances": insts}
}
