// Package deploy reads the deployment files at the top of the repository
// (docker-compose.yml, Dockerfile, deploy/) so that tests can hold them to
// the code they run: the settings the roles know, the metrics they export.
// Docker cannot run where the tests do, so the files are checked by
// reading them.
package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
)

// Dashboard is the part of a Grafana dashboard JSON model that says what
// it shows.
type Dashboard struct {
	Title  string  `json:"title"`
	UID    string  `json:"uid"`
	Panels []Panel `json:"panels"`
}

// Panel is a Grafana panel; a row holds its panels when collapsed.
type Panel struct {
	Title      string      `json:"title"`
	Type       string      `json:"type"`
	Datasource *Datasource `json:"datasource"`
	Targets    []Target    `json:"targets"`
	Panels     []Panel     `json:"panels"`
}

// Target is one query of a panel.
type Target struct {
	RefID      string      `json:"refId"`
	Expr       string      `json:"expr"`
	Datasource *Datasource `json:"datasource"`
}

// Datasource refers to a provisioned data source.
type Datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// Query is one PromQL expression and the panel that shows it.
type Query struct {
	Panel string
	Target
}

// LoadDashboard reads a dashboard JSON model.
func LoadDashboard(path string) (Dashboard, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Dashboard{}, err
	}
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return Dashboard{}, fmt.Errorf("dashboard %s: %w", path, err)
	}
	return d, nil
}

// Queries lists every query of every panel, rows included, in order.
func (d Dashboard) Queries() []Query {
	var out []Query
	var walk func(ps []Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				out = append(out, Query{Panel: p.Title, Target: t})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// promKeywords are the words of PromQL that stand where a metric name could
// but are not one. Functions and aggregations need no list: they are
// always followed by "(".
var promKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"bool": true, "offset": true, "and": true, "or": true, "unless": true, "atan2": true,
	"inf": true, "nan": true,
}

// labelLists are the keywords followed by a parenthesised list of label
// names, which are not metrics either.
var labelLists = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

var nameMatcher = regexp.MustCompile(`__name__\s*=\s*"([^"\\]+)"`)

// MetricNames returns the metric names a PromQL expression selects, sorted
// and without duplicates, as they must appear in an exposition: a histogram
// is named by its _bucket, _sum or _count series. Grafana's $variables and
// ${variables} are allowed anywhere. It is a scanner, not a parser: it
// drops strings, label matchers, range and subquery brackets, numbers and
// durations, function and aggregation names (followed by "(", or by "by"
// or "without"), keywords and the label lists of by, without, on, ignoring
// and group_left/right; every other identifier is a metric name. A selector written only as
// {__name__="name"} is found too.
func MetricNames(expr string) ([]string, error) {
	var names []string
	s := expr
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(s, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '{':
			end, err := closing(s, i, '{', '}')
			if err != nil {
				return nil, err
			}
			for _, m := range nameMatcher.FindAllStringSubmatch(s[i:end], -1) {
				names = append(names, m[1])
			}
			i = end
		case c == '[':
			end, err := closing(s, i, '[', ']')
			if err != nil {
				return nil, err
			}
			i = end
		case c == '}' || c == ']':
			return nil, fmt.Errorf("unbalanced %q at offset %d in %q", c, i, expr)
		case c == '$':
			i = skipVariable(s, i)
		case isDigit(c) || c == '.' && i+1 < len(s) && isDigit(s[i+1]):
			// Numbers, hex numbers, exponents and durations such as 1h30m.
			for i < len(s) && (isIdentChar(s[i]) || s[i] == '.') {
				i++
			}
		case isIdentStart(c):
			start := i
			for i < len(s) && isIdentChar(s[i]) {
				i++
			}
			word := s[start:i]
			next := i
			for next < len(s) && (s[next] == ' ' || s[next] == '\t' || s[next] == '\n' || s[next] == '\r') {
				next++
			}
			calls := next < len(s) && s[next] == '('
			// An aggregation may take its grouping first: sum by (x) (...).
			following := next
			for following < len(s) && isIdentChar(s[following]) {
				following++
			}
			if w := strings.ToLower(s[next:following]); w == "by" || w == "without" {
				calls = true
			}
			lower := strings.ToLower(word)
			switch {
			case labelLists[lower] && calls:
				end, err := closing(s, next, '(', ')')
				if err != nil {
					return nil, err
				}
				i = end
			case promKeywords[lower], calls:
			default:
				names = append(names, word)
			}
		default:
			// Operators, parentheses, commas, the @ modifier.
			i++
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// SampleNames returns the names of the samples in a Prometheus text
// exposition, as a scrape of /metrics returns it: a histogram appears as
// its _bucket, _sum and _count series, the names MetricNames gives.
func SampleNames(exposition string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(exposition, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if end := strings.IndexAny(line, "{ \t"); end > 0 {
			out[line[:end]] = true
		}
	}
	return out
}

// closing returns the offset just after the bracket that closes the one at
// s[open], skipping strings inside.
func closing(s string, open int, left, right byte) (int, error) {
	depth := 0
	for i := open; i < len(s); {
		switch s[i] {
		case '"', '\'', '`':
			end, err := skipString(s, i)
			if err != nil {
				return 0, err
			}
			i = end
			continue
		case left:
			depth++
		case right:
			depth--
			if depth == 0 {
				return i + 1, nil
			}
		}
		i++
	}
	return 0, fmt.Errorf("unclosed %q at offset %d in %q", left, open, s)
}

// skipString returns the offset after the string literal at s[i]; only
// double and single quotes have escapes, as in PromQL.
func skipString(s string, i int) (int, error) {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && q != '`':
			j++
		case s[j] == q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated string at offset %d in %q", i, s)
}

// skipVariable returns the offset after a Grafana variable at s[i]: $name,
// $__name or ${name:format}.
func skipVariable(s string, i int) int {
	i++
	if i < len(s) && s[i] == '{' {
		if end := strings.IndexByte(s[i:], '}'); end >= 0 {
			return i + end + 1
		}
		return len(s)
	}
	for i < len(s) && isIdentChar(s[i]) {
		i++
	}
	return i
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == ':'
}

func isIdentChar(c byte) bool { return isIdentStart(c) || isDigit(c) }
