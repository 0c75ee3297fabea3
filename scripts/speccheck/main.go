// Command speccheck fails when a scenario of openspec/specs has no test
// that names it. A test names a scenario with a comment line
// "// Scenario: <name>", exactly as the spec spells it, in the comment
// directly above a Test function or a t.Run subtest; such a line anywhere
// else is an error, since it would vouch for code that is not a test.
package main

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

func main() {
	if err := run("."); err != nil {
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
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
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
		for i, line := range lines {
			name, ok := strings.CutPrefix(strings.TrimSpace(line), "// Scenario:")
			if !ok {
				continue
			}
			if !documentsTest(lines[i+1:]) {
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
// method) or of a subtest.
var testStart = regexp.MustCompile(`^(func (\([^)]*\) )?Test\w*\(|\s*t\.Run\()`)

// documentsTest reports whether the comment that the lines continue ends
// directly above a test.
func documentsTest(after []string) bool {
	for _, l := range after {
		if strings.HasPrefix(strings.TrimSpace(l), "//") {
			continue
		}
		return testStart.MatchString(l)
	}
	return false
}
