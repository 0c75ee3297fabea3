package main

import (
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
