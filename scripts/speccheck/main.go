// Command speccheck fails when a scenario of openspec/specs has no test
// that names it. A test names a scenario with a comment line
// "// Scenario: <name>", exactly as the spec spells it, in the comment
// directly above a Test function or a t.Run subtest; such a line anywhere
// else is an error, since it would vouch for code that is not a test.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

func main() {
	// With -results it reads `go test -json` on standard input instead,
	// passes the text through, and fails when a test failed or a test
	// that names a scenario was skipped: a skipped proof proves nothing.
	results := flag.Bool("results", false, "read go test -json from stdin, print it as go test would, and fail on failures and on skipped scenario tests")
	flag.Parse()
	var err error
	if *results {
		err = checkResults(".", os.Stdin, os.Stdout)
	} else {
		err = run(".")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "spec-check:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	scenarios := map[string]string{} // name -> spec file
	err := filepath.WalkDir(filepath.Join(root, "openspec", "specs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "spec.md" {
			return err
		}
		return eachLine(path, func(line string) {
			if name, ok := strings.CutPrefix(line, "#### Scenario:"); ok {
				scenarios[strings.TrimSpace(name)] = path
			}
		})
	})
	if err != nil {
		return err
	}
	named := map[string]bool{}
	var misplaced []string
	err = eachTestFile(root, func(path string, lines []string) error {
		for i, line := range lines {
			name, ok := strings.CutPrefix(strings.TrimSpace(line), "// Scenario:")
			if !ok {
				continue
			}
			if _, ok := documentedTest(lines, i); !ok {
				misplaced = append(misplaced, fmt.Sprintf("%s:%d: %q", path, i+1, strings.TrimSpace(name)))
				continue
			}
			named[strings.TrimSpace(name)] = true
		}
		return nil
	})
	if err != nil {
		return err
	}
	var missing, unknown []string
	for name, spec := range scenarios {
		if !named[name] {
			missing = append(missing, fmt.Sprintf("%s: %q", spec, name))
		}
	}
	for name := range named {
		if _, ok := scenarios[name]; !ok {
			unknown = append(unknown, fmt.Sprintf("%q", name))
		}
	}
	sort.Strings(missing)
	sort.Strings(unknown)
	var msgs []string
	if len(missing) > 0 {
		msgs = append(msgs, "scenarios without a test naming them:\n  "+strings.Join(missing, "\n  "))
	}
	if len(misplaced) > 0 {
		sort.Strings(misplaced)
		msgs = append(msgs, "scenario lines outside the comment directly above a Test function or a t.Run subtest:\n  "+strings.Join(misplaced, "\n  "))
	}
	if len(unknown) > 0 {
		msgs = append(msgs, "tests name scenarios that no spec has:\n  "+strings.Join(unknown, "\n  "))
	}
	if len(msgs) > 0 {
		return fmt.Errorf("%s", strings.Join(msgs, "\n"))
	}
	fmt.Printf("spec-check: %d scenarios, each named by a test\n", len(scenarios))
	return nil
}

// eachTestFile calls f with the lines of every Go test file below root.
func eachTestFile(root string, f func(path string, lines []string) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "data") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		var lines []string
		if err := eachLine(path, func(line string) { lines = append(lines, line) }); err != nil {
			return err
		}
		return f(path, lines)
	})
}

func eachLine(path string, f func(string)) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = file.Close() }() // only read
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 1024*1024), 1024*1024)
	for sc.Scan() {
		f(sc.Text())
	}
	return sc.Err()
}

// testStart is the first line of a Test function (or a suite's Test
// method), with its name, or of a subtest, with its name as written.
var (
	testFunc    = regexp.MustCompile(`^func (\([^)]*\) )?(Test\w*)\(`)
	subtestCall = regexp.MustCompile(`^\s*t\.Run\("([^"]*)"`)
)

// testRef is how go test names the test a scenario line documents: a Test
// function, a suite's method (named after its suite's runner, so matched
// as a suffix), or a subtest of either.
type testRef struct {
	name   string
	suffix bool
}

func (r testRef) matches(test string) bool {
	if r.suffix {
		return strings.HasSuffix(test, "/"+r.name)
	}
	return test == r.name
}

// documentedTest finds the test that the comment holding line i stands
// directly above, if it is one.
func documentedTest(lines []string, i int) (testRef, bool) {
	j := i + 1
	for j < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[j]), "//") {
		j++
	}
	if j == len(lines) {
		return testRef{}, false
	}
	if m := testFunc.FindStringSubmatch(lines[j]); m != nil {
		return testRef{name: m[2], suffix: m[1] != ""}, true
	}
	m := subtestCall.FindStringSubmatch(lines[j])
	if m == nil {
		return testRef{}, false
	}
	for k := j - 1; k >= 0; k-- {
		if p := testFunc.FindStringSubmatch(lines[k]); p != nil {
			// go test writes a subtest's spaces as underscores.
			return testRef{name: p[2] + "/" + strings.ReplaceAll(m[1], " ", "_"), suffix: p[1] != ""}, true
		}
	}
	return testRef{}, false
}

// scenarioTests maps every test that names a scenario, by package import
// path, to the scenarios it names.
func scenarioTests(root string) (map[string]map[testRef][]string, error) {
	mod, err := modulePath(root)
	if err != nil {
		return nil, err
	}
	out := map[string]map[testRef][]string{}
	err = eachTestFile(root, func(path string, lines []string) error {
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := mod
		if rel != "." {
			pkg += "/" + filepath.ToSlash(rel)
		}
		for i, line := range lines {
			name, ok := strings.CutPrefix(strings.TrimSpace(line), "// Scenario:")
			if !ok {
				continue
			}
			if ref, ok := documentedTest(lines, i); ok {
				if out[pkg] == nil {
					out[pkg] = map[testRef][]string{}
				}
				out[pkg][ref] = append(out[pkg][ref], strings.TrimSpace(name))
			}
		}
		return nil
	})
	return out, err
}

func modulePath(root string) (string, error) {
	var mod string
	err := eachLine(filepath.Join(root, "go.mod"), func(line string) {
		if m, ok := strings.CutPrefix(line, "module "); ok && mod == "" {
			mod = strings.TrimSpace(m)
		}
	})
	if err == nil && mod == "" {
		err = errors.New("go.mod names no module")
	}
	return mod, err
}

// verboseOnly are the lines that -json adds to what plain go test prints.
func verboseOnly(line string) bool {
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME", "--- PASS", "--- SKIP", "PASS\n"} {
		if strings.HasPrefix(strings.TrimLeft(line, " "), p) {
			return true
		}
	}
	return false
}

// testEvent is one line of `go test -json`.
type testEvent struct {
	Action, Package, Test, Output string
	ImportPath                    string
}

// checkResults prints what plain `go test` would (a test's output only
// when it fails, every package's summary line) and then fails when a test
// or a build failed, or when a test that names a scenario was skipped.
func checkResults(root string, r io.Reader, w io.Writer) error {
	named, err := scenarioTests(root)
	if err != nil {
		return err
	}
	var failed []string
	packages := 0
	skipped := map[string]bool{}
	held := map[string][]string{} // a running test's output, by package and test
	dec := json.NewDecoder(r)
	for {
		var e testEvent
		if err := dec.Decode(&e); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("read go test -json: %w", err)
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "build-output":
			if _, err := io.WriteString(w, e.Output); err != nil {
				return err
			}
		case "output":
			if verboseOnly(e.Output) {
				continue
			}
			if e.Test == "" {
				if _, err := io.WriteString(w, e.Output); err != nil {
					return err
				}
				continue
			}
			held[key] = append(held[key], e.Output)
		case "fail", "build-fail":
			if e.Test == "" {
				packages++
			}
			failed = append(failed, strings.TrimSpace(e.Package+e.ImportPath+" "+e.Test))
			for _, line := range held[key] {
				if _, err := io.WriteString(w, line); err != nil {
					return err
				}
			}
			delete(held, key)
		case "pass", "skip":
			if e.Test == "" {
				packages++
			}
			delete(held, key)
			if e.Action == "pass" {
				continue
			}
			for ref, scenarios := range named[e.Package] {
				if e.Test != "" && ref.matches(e.Test) {
					for _, s := range scenarios {
						skipped[fmt.Sprintf("%s %s: %q", e.Package, e.Test, s)] = true
					}
				}
			}
		}
	}
	var msgs []string
	if packages == 0 {
		msgs = append(msgs, "go test reported no package: it did not run")
	}
	if len(failed) > 0 {
		msgs = append(msgs, fmt.Sprintf("%d failed (packages and tests): %s", len(failed), strings.Join(failed, ", ")))
	}
	if len(skipped) > 0 {
		list := make([]string, 0, len(skipped))
		for s := range skipped {
			list = append(list, s)
		}
		sort.Strings(list)
		msgs = append(msgs, "tests that name a scenario were skipped, so nothing proved it:\n  "+strings.Join(list, "\n  "))
	}
	if len(msgs) > 0 {
		return errors.New(strings.Join(msgs, "\n"))
	}
	return nil
}
