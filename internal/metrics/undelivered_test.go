package metrics

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Scenario: Undelivered replies start at zero
func TestUndeliveredReasons(t *testing.T) {
	t.Run("start at zero", testUndeliveredStartAtZero)
	t.Run("match the activities", testUndeliveredMatchActivities)
}

func testUndeliveredStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg)
	if got := testutil.CollectAndCount(m.RepliesUndelivered); got != len(UndeliveredReasons) {
		t.Errorf("series of a fresh RepliesUndelivered = %d; want one per reason, %d", got, len(UndeliveredReasons))
	}
	for _, reason := range UndeliveredReasons {
		if got := testutil.ToFloat64(m.RepliesUndelivered.WithLabelValues(reason)); got != 0 {
			t.Errorf("replies_undelivered_total{reason=%q} = %v; want 0", reason, got)
		}
	}
}

// The reasons are declared where replies are sent; this package cannot
// import that one (it imports this), so the test reads its source and
// fails when a reason is added there and not here.
func testUndeliveredMatchActivities(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "activities", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("activities sources: %v, %v", files, err)
	}
	var declared []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			spec, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range spec.Names {
				if !strings.HasPrefix(name.Name, "Undelivered") || i >= len(spec.Values) {
					continue
				}
				lit, ok := spec.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Errorf("%s is not a string constant", name.Name)
					continue
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				declared = append(declared, v)
			}
			return true
		})
	}
	slices.Sort(declared)
	want := slices.Sorted(slices.Values(UndeliveredReasons))
	if !slices.Equal(declared, want) {
		t.Errorf("activities declare reasons %q; UndeliveredReasons = %q", declared, want)
	}
}
