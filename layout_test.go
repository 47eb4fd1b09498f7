package baton

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// runtimePackages are the packages below this one (doc.go, "Where things
// live"): each may import those after it in the list and none before it,
// and none imports this package. Test files are included: a test that
// needs a package above its own is a sign the code does too.
var runtimePackages = []string{
	"internal/engine",
	"internal/query",
	"internal/govern",
	"internal/commit",
	"internal/rewind",
	"internal/work",
	"internal/restore",
	"internal/global",
	"internal/topics",
	"internal/taskstore",
	"internal/purge",
	"internal/measure",
	"internal/metrics",
	"internal/errs",
	"member",
	"instance",
	"lifecycle",
	"assign",
	"protocol",
}

// TestLayering: imports run one way, down the list above.
func TestLayering(t *testing.T) {
	const module = "github.com/baton-streams/baton"
	for i, dir := range runtimePackages {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v): the list is out of date", dir, err)
		}
		above := append([]string{"."}, runtimePackages[:i]...)
		for _, f := range files {
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range af.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				if path != module && !strings.HasPrefix(path, module+"/") {
					continue
				}
				rel := strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
				if rel == "" {
					rel = "."
				}
				if slices.Contains(above, rel) {
					t.Errorf("%s imports %s, which is above it", f, path)
				}
			}
		}
	}
}
