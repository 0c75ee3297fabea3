package job

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Scenario: Every failure kind is declared once with its behaviour
func TestKindsDeclared(t *testing.T) {
	t.Run("every constant has its row", testConstantsListed)
	t.Run("kinds used elsewhere are declared", testKindsUsedAreDeclared)
	t.Run("traits", testTraits)
}

// constants reads the string constants of each named type in this
// package's own source.
func constants(t *testing.T) map[string][]string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				typ, ok := vs.Type.(*ast.Ident)
				if !ok {
					continue
				}
				for _, v := range vs.Values {
					if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						s, _ := strconv.Unquote(lit.Value)
						out[typ.Name] = append(out[typ.Name], s)
					}
				}
			}
		}
	}
	return out
}

func strs[S ~string](xs []S) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = string(x)
	}
	slices.Sort(out)
	return out
}

func testConstantsListed(t *testing.T) {
	declared := constants(t)
	for typ, listed := range map[string][]string{
		"Kind":         strs(Kinds()),
		"WebhookError": strs(WebhookErrors()),
		"Undelivered":  strs(UndeliveredReasons()),
	} {
		consts := slices.Sorted(slices.Values(declared[typ]))
		if len(consts) == 0 {
			t.Errorf("no %s constants found", typ)
		}
		if !slices.Equal(listed, slices.Compact(slices.Clone(listed))) {
			t.Errorf("%s list has duplicates: %q", typ, listed)
		}
		if !slices.Equal(consts, listed) {
			t.Errorf("%s constants %q; listed %q", typ, consts, listed)
		}
	}
}

// testKindsUsedAreDeclared reads the module's sources for kinds spelled
// out elsewhere, as a constant or a conversion of a literal: each must be
// declared here, or it would be retried and blamed on the service by
// default without anyone deciding so.
func testKindsUsedAreDeclared(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	isKind := func(e ast.Expr) bool {
		switch e := e.(type) {
		case *ast.Ident:
			return e.Name == "Kind"
		case *ast.SelectorExpr:
			return e.Sel.Name == "Kind"
		}
		return false
	}
	check := func(pos token.Pos, e ast.Expr) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return
		}
		s, _ := strconv.Unquote(lit.Value)
		if s != "" && !Kind(s).Declared() {
			t.Errorf("%s: kind %q is not declared in internal/job", fset.Position(pos), s)
		}
	}
	seen := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		seen++
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				if n.Type != nil && isKind(n.Type) {
					for _, v := range n.Values {
						check(v.Pos(), v)
					}
				}
			case *ast.CallExpr:
				if len(n.Args) == 1 && isKind(n.Fun) {
					check(n.Pos(), n.Args[0])
				}
			case *ast.CompositeLit:
				// Kind: "..." in a struct literal such as job.Failure.
				for _, el := range n.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok {
						if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Kind" {
							check(kv.Value.Pos(), kv.Value)
						}
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen < 50 {
		t.Fatalf("read %d source files under %s; want the whole module", seen, root)
	}
}

func testTraits(t *testing.T) {
	for _, k := range Kinds() {
		if k.BlamesInput() && !k.Verdict() {
			t.Errorf("%s blames the input but is retried: another attempt at the same recording cannot help", k)
		}
	}
	want := map[Kind]bool{EmptyAudio: true, UnsupportedFormat: true, TooLong: true, NoSpeech: true}
	for _, k := range Kinds() {
		if got := k.BlamesInput(); got != want[k] {
			t.Errorf("%s.BlamesInput() = %v; want %v", k, got, want[k])
		}
	}
	var verdicts []Kind
	for _, k := range Kinds() {
		if k.Verdict() {
			verdicts = append(verdicts, k)
		}
	}
	if got := Verdicts(); !slices.Equal(got, verdicts) {
		t.Errorf("Verdicts() = %q; want the kinds whose Verdict() holds, %q", got, verdicts)
	}
	if k := Kind("made_up"); k.Declared() || k.Verdict() || k.BlamesInput() {
		t.Errorf("an undeclared kind is declared, a verdict or blames the input")
	}
}
