package assign

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// The wire form of state.json. Pointers tell a field left out (default)
// from one set to its zero value.
type wireState struct {
	Config    *wireConfig    `json:"config"`
	Tasks     []wireTask     `json:"tasks"`
	Instances []wireInstance `json:"instances"`
}

type wireConfig struct {
	Standbys        *int   `json:"standbys"`
	MaxLearners     *int   `json:"max_learners"`
	AcceptableLag   *int64 `json:"acceptable_lag"`
	SeparateBuckets bool   `json:"separate_buckets"`
}

type wireTask struct {
	ID       *string  `json:"id"`
	Stateful *bool    `json:"stateful"`
	Load     *float64 `json:"load"`
}

type wireInstance struct {
	ID       *string          `json:"id"`
	Capacity *int             `json:"capacity"`
	Rack     string           `json:"rack"`
	Leaving  bool             `json:"leaving"`
	Active   []TaskID         `json:"active"`
	Standby  []TaskID         `json:"standby"`
	Learner  []TaskID         `json:"learner"`
	Lag      map[TaskID]int64 `json:"lag"`
}

// Decode reads one state.json document, fills in defaults and validates
// it. Any error wraps ErrInvalidState and names the offending field.
func Decode(r io.Reader) (State, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return State{}, fmt.Errorf("%w: reading input: %v", ErrInvalidState, err)
	}
	return DecodeBytes(data)
}

// DecodeBytes is Decode on a byte slice.
func DecodeBytes(data []byte) (State, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var w wireState
	if err := dec.Decode(&w); err != nil {
		return State{}, jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return State{}, fieldErr("(document)", "unexpected data after the JSON object")
	}
	s := State{Config: DefaultConfig()}
	if c := w.Config; c != nil {
		if c.Standbys != nil {
			s.Config.Standbys = *c.Standbys
		}
		if c.MaxLearners != nil {
			s.Config.MaxLearners = *c.MaxLearners
		}
		if c.AcceptableLag != nil {
			s.Config.AcceptableLag = *c.AcceptableLag
		}
		s.Config.SeparateBuckets = c.SeparateBuckets
	}
	for i, t := range w.Tasks {
		if t.ID == nil {
			return State{}, fieldErr(fmt.Sprintf("tasks[%d].id", i), "missing")
		}
		task := Task{ID: TaskID(*t.ID), Stateful: true, Load: 1}
		if t.Stateful != nil {
			task.Stateful = *t.Stateful
		}
		if t.Load != nil {
			task.Load = *t.Load
		}
		s.Tasks = append(s.Tasks, task)
	}
	for i, in := range w.Instances {
		if in.ID == nil {
			return State{}, fieldErr(fmt.Sprintf("instances[%d].id", i), "missing")
		}
		inst := Instance{
			ID: *in.ID, Capacity: 1, Rack: in.Rack, Leaving: in.Leaving,
			Active: in.Active, Standby: in.Standby, Learner: in.Learner, Lag: in.Lag,
		}
		if in.Capacity != nil {
			inst.Capacity = *in.Capacity
		}
		s.Instances = append(s.Instances, inst)
	}
	if err := Validate(s); err != nil {
		return State{}, err
	}
	return s, nil
}

// jsonError turns encoding/json's errors into one line naming the field.
func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "(document)"
		}
		return fieldErr(field, "wrong type: got JSON %s, want %s", te.Value, goTypeName(te.Type.String()))
	case errors.As(err, &se):
		return fieldErr("(document)", "not valid JSON at byte %d: %v", se.Offset, se)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fieldErr("(document)", "not valid JSON: input ended early")
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return fieldErr(strings.Trim(f, `"`), "unknown field")
	}
	return fieldErr("(document)", "%s", strings.TrimPrefix(msg, "json: "))
}

func goTypeName(t string) string {
	switch {
	case strings.Contains(t, "map["):
		return "an object of task id to lag"
	case strings.HasPrefix(t, "[]"):
		return "an array"
	case strings.Contains(t, "int"):
		return "an integer"
	case strings.Contains(t, "float"):
		return "a number"
	case strings.Contains(t, "bool"):
		return "true or false"
	case strings.Contains(t, "string"), strings.Contains(t, "TaskID"):
		return "a string"
	}
	return "an object"
}

// Validate checks a State built in code the way Decode checks a document.
// Every error wraps ErrInvalidState and is a *FieldError.
func Validate(s State) error {
	sc := getScratch()
	defer sc.release()
	_, err := build(s, sc)
	return err
}

// lagError names the first bad entry of a lag map in key order, so the
// message does not depend on map iteration.
func lagError(i int, lags map[TaskID]int64, found func(TaskID) bool) error {
	for _, id := range slices.Sorted(maps.Keys(lags)) {
		field := fmt.Sprintf("instances[%d].lag[%q]", i, id)
		if !found(id) {
			return fieldErr(field, "unknown task %q", id)
		}
		if lags[id] < 0 {
			return fieldErr(field, "must be >= 0, got %d", lags[id])
		}
	}
	return nil
}
