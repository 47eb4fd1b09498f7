package baton

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/baton-streams/baton/internal/engine"
)

// TestEventKindsMatchTheRuntime: every kind of event the runtime reports
// is one the API documents, with the same name and value, and the other
// way round.
func TestEventKindsMatchTheRuntime(t *testing.T) {
	api, runtime := eventKinds(t, "events.go"), eventKinds(t, "internal/engine/events.go")
	if len(api) == 0 {
		t.Fatal("no event kinds found in events.go")
	}
	if !maps.Equal(api, runtime) {
		t.Errorf("event kinds differ:\n  baton:  %v\n  engine: %v", api, runtime)
	}
}

// eventKinds reads the EventKind constants declared in file.
func eventKinds(t *testing.T, file string) map[string]string {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "EventKind" {
				continue
			}
			for i, name := range v.Names {
				kinds[name.Name], _ = strconv.Unquote(v.Values[i].(*ast.BasicLit).Value)
			}
		}
	}
	return kinds
}

// TestConversionsKeepEveryField: the API's Event and Status carry every
// field of the runtime's, at every depth, with its value: a field added
// to one side only, or left out of a conversion, fails.
func TestConversionsKeepEveryField(t *testing.T) {
	var es engine.Status
	fill(reflect.ValueOf(&es).Elem(), new(int))
	sameFields(t, "Status", reflect.ValueOf(publicStatus(es)), reflect.ValueOf(es))

	var ee engine.Event
	fill(reflect.ValueOf(&ee).Elem(), new(int))
	sameFields(t, "Event", reflect.ValueOf(publicEvent(ee)), reflect.ValueOf(ee))
}

var timeType = reflect.TypeOf(time.Time{})

// fill sets every field of v, at every depth, to a value that is not
// zero and differs from the others.
func fill(v reflect.Value, n *int) {
	*n++
	switch {
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(time.Unix(int64(*n), 0)))
	case v.Kind() == reflect.String:
		v.SetString("s" + strconv.Itoa(*n))
	case v.CanInt():
		v.SetInt(int64(*n))
	case v.CanFloat():
		v.SetFloat(float64(*n) + 0.5)
	case v.Kind() == reflect.Bool:
		v.SetBool(true)
	case v.Kind() == reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i), n)
		}
	case v.Kind() == reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), n)
	case v.Kind() == reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(v.Index(i), n)
		}
	case v.Kind() == reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		for range 2 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(k, n)
			fill(e, n)
			v.SetMapIndex(k, e)
		}
	default:
		panic("fill: no value for " + v.Type().String())
	}
}

// sameFields reports where api and runtime differ: a field missing on
// either side, or another value.
func sameFields(t *testing.T, path string, api, runtime reflect.Value) {
	t.Helper()
	switch {
	case runtime.Type() == timeType || runtime.Kind() != reflect.Struct && runtime.Kind() != reflect.Pointer &&
		runtime.Kind() != reflect.Slice && runtime.Kind() != reflect.Map:
		if a, r := fmt.Sprint(api.Interface()), fmt.Sprint(runtime.Interface()); a != r {
			t.Errorf("%s: %s in the API, %s in the runtime", path, a, r)
		}
	case runtime.Kind() == reflect.Struct:
		if api.NumField() != runtime.NumField() {
			t.Errorf("%s: %d fields in the API, %d in the runtime", path, api.NumField(), runtime.NumField())
		}
		for i := range runtime.NumField() {
			name := runtime.Type().Field(i).Name
			f := api.FieldByName(name)
			if !f.IsValid() {
				t.Errorf("%s.%s: missing in the API", path, name)
				continue
			}
			sameFields(t, path+"."+name, f, runtime.Field(i))
		}
	case runtime.Kind() == reflect.Pointer:
		if api.IsNil() != runtime.IsNil() {
			t.Errorf("%s: nil %v in the API, %v in the runtime", path, api.IsNil(), runtime.IsNil())
		} else if !runtime.IsNil() {
			sameFields(t, path, api.Elem(), runtime.Elem())
		}
	case runtime.Kind() == reflect.Slice:
		if api.Len() != runtime.Len() {
			t.Errorf("%s: %d elements in the API, %d in the runtime", path, api.Len(), runtime.Len())
			return
		}
		for i := range runtime.Len() {
			sameFields(t, fmt.Sprintf("%s[%d]", path, i), api.Index(i), runtime.Index(i))
		}
	case runtime.Kind() == reflect.Map:
		if api.Len() != runtime.Len() {
			t.Errorf("%s: %d entries in the API, %d in the runtime", path, api.Len(), runtime.Len())
			return
		}
		for _, k := range runtime.MapKeys() {
			e := api.MapIndex(k.Convert(api.Type().Key()))
			if !e.IsValid() {
				t.Errorf("%s[%v]: missing in the API", path, k)
				continue
			}
			sameFields(t, fmt.Sprintf("%s[%v]", path, k), e, runtime.MapIndex(k))
		}
	}
}
