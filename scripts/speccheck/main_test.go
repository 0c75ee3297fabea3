package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Scenario: Only a scenario line directly above a test names the scenario
func TestScenarioLinesMustDocumentTests(t *testing.T) {
	spec := "### Requirement: r\n\n#### Scenario: Named above a test\n\n#### Scenario: Named above a subtest\n\n#### Scenario: Named inside a body\n"
	// The fixtures spell the marker differently, so that this file names
	// no scenario itself.
	mark := func(src string) string { return strings.ReplaceAll(src, "// SCENARIO", "// Scenario:") }
	tests := map[string]string{
		"ok_test.go": `package p

// SCENARIO Named above a test
//
// More words about it.
func TestA(t *testing.T) {
	// SCENARIO Named above a subtest
	t.Run("x", func(t *testing.T) {})
}
`,
		"bad_test.go": `package p

func TestB(t *testing.T) {
	// SCENARIO Named inside a body
	check(t)
}
`,
	}
	root := t.TempDir()
	write := func(path, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "openspec", "specs", "s", "spec.md"), spec)
	for name, body := range tests {
		write(filepath.Join(root, "p", name), mark(body))
	}
	err := run(root)
	if err == nil {
		t.Fatal("a scenario named inside a test's body passed")
	}
	msg := err.Error()
	if !strings.Contains(msg, `bad_test.go:4: "Named inside a body"`) || !strings.Contains(msg, `"Named inside a body"`) {
		t.Errorf("error = %s; want the misplaced line and the scenario left without a test", msg)
	}
	if strings.Contains(msg, "Named above a") {
		t.Errorf("error = %s; the scenarios above a test and a subtest are named", msg)
	}
}

// Scenario: A test that names a scenario and is skipped fails the run
func TestSkippedScenarioTestsFail(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/m\n",
		"p/p_test.go": strings.ReplaceAll(`package p

// SCENARIO Proved by A
func TestA(t *testing.T) {}

type suite struct{}

// SCENARIO Proved by a suite method
func (s *suite) Test_B() {}

func TestC(t *testing.T) {
	// SCENARIO Proved by a subtest
	t.Run("sub test", func(t *testing.T) {})
}
`, "// SCENARIO", "// Scenario:"),
	}
	for name, body := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	event := func(action, test, output string) string {
		return fmt.Sprintf(`{"Action":%q,"Package":"example.com/m/p","Test":%q,"Output":%q}`+"\n", action, test, output)
	}
	pkgOK := event("output", "", "ok  \texample.com/m/p\t0.1s\n") + event("pass", "", "")
	tests := []struct {
		name       string
		stream     string
		wantErr    []string
		wantOut    []string
		notWantOut []string
	}{
		{"all pass", event("run", "TestA", "") + event("output", "TestA", "=== RUN   TestA\n") + event("output", "TestA", "noise of a passing test\n") +
			event("output", "TestA", "--- PASS: TestA (0.00s)\n") + event("pass", "TestA", "") + pkgOK,
			nil, []string{"ok  \texample.com/m/p"}, []string{"noise of a passing test", "=== RUN", "--- PASS"}},
		{"a failure shows its output", event("output", "TestA", "p_test.go:4: got 1; want 2\n") + event("output", "TestA", "--- FAIL: TestA (0.00s)\n") +
			event("fail", "TestA", "") + event("output", "", "FAIL\texample.com/m/p\t0.1s\n") + event("fail", "", ""),
			[]string{"failed", "example.com/m/p TestA"}, []string{"got 1; want 2", "--- FAIL: TestA", "FAIL\texample.com/m/p"}, nil},
		{"a skipped scenario test", event("skip", "TestA", "") + pkgOK, []string{`"Proved by A"`}, nil, nil},
		{"a skipped suite method", event("skip", "TestSuite/Test_B", "") + pkgOK, []string{`"Proved by a suite method"`}, nil, nil},
		{"a skipped subtest", event("skip", "TestC/sub_test", "") + pkgOK, []string{`"Proved by a subtest"`}, nil, nil},
		{"a skipped test that names no scenario", event("skip", "TestD", "") + pkgOK, nil, nil, nil},
		{"nothing ran", "", []string{"no package"}, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			err := checkResults(root, strings.NewReader(tc.stream), &out)
			if (err != nil) != (len(tc.wantErr) > 0) {
				t.Fatalf("err = %v; want one %v", err, tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v; want %q in it", err, w)
				}
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output %q lacks %q", out.String(), w)
				}
			}
			for _, w := range tc.notWantOut {
				if strings.Contains(out.String(), w) {
					t.Errorf("output %q holds %q", out.String(), w)
				}
			}
		})
	}
}
