package deploy

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/transcriber/transcriber/internal/config"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, ...
	args string
}

// stage is one FROM and what follows it.
type stage struct {
	name, image string
	body        []instruction
}

// dockerfile is the part of a Dockerfile these tests read.
type dockerfile struct {
	args   map[string]string // global ARGs, before the first FROM
	stages []stage
}

// parseDockerfile reads a Dockerfile simply: comments and blank lines
// dropped, continuation lines joined, global ARG defaults substituted into
// FROM. Heredocs and escape directives are not used in ours.
func parseDockerfile(t *testing.T, path string) dockerfile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }() // only read
	var lines []string
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(line)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur.Len() > 0 {
		t.Fatalf("%s ends inside a continued line", path)
	}
	d := dockerfile{args: map[string]string{}}
	for _, line := range lines {
		cmd, args, _ := strings.Cut(line, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		switch {
		case in.cmd == "FROM":
			f := strings.Fields(os.Expand(in.args, func(k string) string { return d.args[k] }))
			st := stage{image: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			d.stages = append(d.stages, st)
		case len(d.stages) == 0:
			if in.cmd != "ARG" {
				t.Fatalf("%s: %s before the first FROM", path, in.cmd)
			}
			k, v, _ := strings.Cut(in.args, "=")
			d.args[k] = v
		default:
			last := &d.stages[len(d.stages)-1]
			last.body = append(last.body, in)
		}
	}
	return d
}

func (s stage) all(cmd string) []string {
	var out []string
	for _, in := range s.body {
		if in.cmd == cmd {
			out = append(out, in.args)
		}
	}
	return out
}

// env returns the stage's ENV settings, in KEY=VALUE form.
func (s stage) env(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, args := range s.all("ENV") {
		for _, kv := range strings.Fields(args) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				t.Fatalf("ENV %q: want KEY=VALUE pairs", args)
			}
			out[k] = v
		}
	}
	return out
}

func dockerfileOf(t *testing.T) dockerfile {
	return parseDockerfile(t, filepath.Join(root, "Dockerfile"))
}

// dockerfileHTTPPort is the port the image's HTTP server listens on.
func dockerfileHTTPPort(t *testing.T) string {
	t.Helper()
	d := dockerfileOf(t)
	_, port, err := net.SplitHostPort(d.stages[len(d.stages)-1].env(t)["TRANSCRIBER_HTTP_ADDR"])
	if err != nil {
		t.Fatalf("runtime TRANSCRIBER_HTTP_ADDR: %v", err)
	}
	return port
}

// Scenario: The image is built in stages and runs as a non-root user with a health check
func TestDockerfile(t *testing.T) {
	d := dockerfileOf(t)
	names := map[string]stage{}
	for _, s := range d.stages {
		names[s.name] = s
	}
	build, ok := names["build"]
	if !ok {
		t.Fatalf("no stage named build among %+v", d.stages)
	}
	runtime := d.stages[len(d.stages)-1]
	if runtime.name != "runtime" {
		t.Errorf("last stage is %q; want runtime", runtime.name)
	}

	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(readFile(t, "go.mod"))
	if goVersion == nil || build.image != "golang:"+goVersion[1]+"-bookworm" {
		t.Errorf("build stage FROM %s; want golang:<go.mod's go version>-bookworm (%v)", build.image, goVersion)
	}
	runs := strings.Join(build.all("RUN"), "\n")
	for _, want := range []string{"--mount=type=cache,target=/go/pkg/mod", "go mod download", "go build", "./cmd/transcriber"} {
		if !strings.Contains(runs, want) {
			t.Errorf("build stage RUNs lack %q:\n%s", want, runs)
		}
	}

	// Debian 12 is bookworm: its pocketsphinx is the one the local engine
	// is tested with.
	if !regexp.MustCompile(`^debian:(12\.[0-9]+|bookworm-[0-9]{8})-slim$`).MatchString(runtime.image) {
		t.Errorf("runtime FROM %s; want a pinned Debian 12 (bookworm) slim image", runtime.image)
	}
	installs := strings.Fields(strings.Join(runtime.all("RUN"), " "))
	for _, pkg := range []string{"ffmpeg", "pocketsphinx", "pocketsphinx-en-us", "ca-certificates"} {
		if !slices.Contains(installs, pkg) {
			t.Errorf("runtime stage does not install %s", pkg)
		}
	}
	copied := false
	for _, args := range runtime.all("COPY") {
		if from, ok := strings.CutPrefix(strings.Fields(args)[0], "--from="); ok {
			if _, exists := names[from]; !exists {
				t.Errorf("COPY --from=%s names no stage", from)
			}
			copied = copied || strings.Contains(args, "/transcriber")
		}
	}
	if !copied {
		t.Error("runtime stage does not copy the binary from the build stage")
	}

	users := runtime.all("USER")
	if len(users) == 0 {
		t.Fatal("runtime stage has no USER: it would run as root")
	}
	user, _, _ := strings.Cut(users[len(users)-1], ":")
	if user == "root" || user == "0" || user == "" {
		t.Errorf("runtime stage runs as %q; want a non-root user", users[len(users)-1])
	}

	env := runtime.env(t)
	if got := env["TRANSCRIBER_HTTP_ADDR"]; got != "0.0.0.0:8080" {
		t.Errorf("TRANSCRIBER_HTTP_ADDR = %q; want 0.0.0.0:8080, reachable through a published port", got)
	}
	known := map[string]bool{}
	for _, s := range config.Settings() {
		known[s[0]] = true
	}
	for k := range env {
		if !known[k] {
			t.Errorf("ENV %s is not a setting transcriber knows", k)
		}
	}
	health := runtime.all("HEALTHCHECK")
	if len(health) != 1 || !strings.Contains(health[0], "/healthz") || !strings.Contains(health[0], "TRANSCRIBER_HTTP_ADDR") {
		t.Errorf("HEALTHCHECK = %q; want one that asks /healthz on TRANSCRIBER_HTTP_ADDR's port", health)
	}
	if eps := runtime.all("ENTRYPOINT"); len(eps) != 1 || !jsonEquals(eps[0], []string{"transcriber"}) {
		t.Errorf("ENTRYPOINT = %q; want [\"transcriber\"]", eps)
	}

	// The build context keeps what the build needs.
	for _, pattern := range strings.Split(readFile(t, ".dockerignore"), "\n") {
		pattern = strings.TrimSpace(pattern)
		if pattern == "" || strings.HasPrefix(pattern, "#") {
			continue
		}
		for _, needed := range []string{"go.mod", "go.sum", "cmd", "internal", "activities", "workflows"} {
			if ok, _ := filepath.Match(pattern, needed); ok {
				t.Errorf(".dockerignore pattern %q drops %s, which the build needs", pattern, needed)
			}
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func jsonEquals(s string, want []string) bool {
	var got []string
	return json.Unmarshal([]byte(s), &got) == nil && slices.Equal(got, want)
}

// Scenario: The roles' health checks ask the port the image listens on
func TestComposeHealthChecksMatchTheImage(t *testing.T) {
	p := project(t)
	port := dockerfileHTTPPort(t)
	for name := range roles {
		s := service(t, p, name)
		if !healthy(s) || !strings.Contains(strings.Join(s.HealthCheck.Test, " "), "127.0.0.1:"+port+"/healthz") {
			t.Errorf("%s health check %v does not ask /healthz on port %s", name, s.HealthCheck, port)
		}
		if name == "api" {
			if len(s.Ports) != 1 || s.Ports[0].Target != 8080 || port != "8080" {
				t.Errorf("api publishes %+v; want the image's port %s", s.Ports, port)
			}
		}
	}
}
