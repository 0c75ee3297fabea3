package deploy

import (
	"context"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	enumspb "go.temporal.io/api/enums/v1"
	"go.yaml.in/yaml/v3"

	"github.com/transcriber/transcriber/internal/config"
	"github.com/transcriber/transcriber/workflows"
)

const (
	root        = "../.."
	composeFile = root + "/docker-compose.yml"
)

// absRoot is the repository, as compose resolves relative paths.
var absRoot = func() string {
	abs, err := filepath.Abs(root)
	if err != nil {
		panic(err)
	}
	return abs
}()

// roles are the transcriber services and the command each runs.
var roles = map[string]string{"worker": "worker", "api": "api", "bot": "bot"}

// composeEnv is what an operator sets before "docker compose up": only
// the one variable without a default.
var composeEnv = []string{"TRANSCRIBER_API_TOKENS=test-token"}

// loadCompose loads the compose file as Docker Compose does: interpolated
// with env only (not this process's environment), validated against the
// Compose specification's schema, checked for consistency, with every
// profile active so that no service escapes the checks.
func loadCompose(t *testing.T, env []string) (*types.Project, error) {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{composeFile},
		cli.WithWorkingDirectory(root),
		cli.WithEnv(env),
		cli.WithProfiles([]string{"*"}),
	)
	if err != nil {
		t.Fatal(err)
	}
	return opts.LoadProject(context.Background())
}

func project(t *testing.T) *types.Project {
	t.Helper()
	p, err := loadCompose(t, composeEnv)
	if err != nil {
		t.Fatalf("docker-compose.yml does not load: %v", err)
	}
	return p
}

func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, err := p.GetService(name)
	if err != nil {
		t.Fatalf("service %s: %v", name, err)
	}
	return s
}

func env(s types.ServiceConfig, key string) (string, bool) {
	v, ok := s.Environment[key]
	if !ok || v == nil {
		return "", false
	}
	return *v, true
}

// goModVersion is the version go.mod requires of module.
func goModVersion(t *testing.T, module string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(module) + `\s+v(\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("go.mod does not require %s", module)
	}
	return string(m[1])
}

// Scenario: The compose file is valid and asks for the API tokens
func TestComposeFileLoads(t *testing.T) {
	p := project(t)
	want := []string{"api", "bot", "grafana", "nats", "object-store", "object-store-bucket", "postgresql", "prometheus",
		"recognizer", "temporal", "temporal-namespace", "temporal-schema", "temporal-ui", "worker"}
	if got := p.ServiceNames(); !slices.Equal(got, want) {
		t.Errorf("services = %q; want %q", got, want)
	}
	// Without tokens the API would serve nothing: compose refuses to start,
	// naming the variable.
	_, err := loadCompose(t, nil)
	if err == nil || !strings.Contains(err.Error(), "TRANSCRIBER_API_TOKENS") {
		t.Errorf("loading without TRANSCRIBER_API_TOKENS: %v; want an error naming it", err)
	}
	// Every file the stack mounts is in the repository.
	for _, s := range p.Services {
		for _, v := range s.Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			if _, err := os.Stat(v.Source); err != nil {
				t.Errorf("%s mounts %s: %v", s.Name, v.Source, err)
			}
		}
	}
}

// Scenario: Every variable of the compose file is documented in the README
func TestComposeVariablesDocumented(t *testing.T) {
	var compose strings.Builder
	for _, line := range strings.Split(readFile(t, "docker-compose.yml"), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			compose.WriteString(line + "\n")
		}
	}
	readme := readFile(t, "README.md")
	start := strings.Index(readme, "## Running at scale")
	if start < 0 {
		t.Fatal(`README has no "Running at scale" section`)
	}
	section := readme[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	vars := regexp.MustCompile(`\$\{([A-Z][A-Z0-9_]*)`).FindAllStringSubmatch(compose.String(), -1)
	if len(vars) == 0 {
		t.Fatal("docker-compose.yml uses no variables")
	}
	for _, m := range vars {
		if !strings.Contains(section, "`"+m[1]+"`") {
			t.Errorf("${%s} is not in README's Running at scale table", m[1])
		}
	}
}

// Scenario: Every transcriber role gets the settings it needs and only settings transcriber knows
func TestComposeRolesAreWired(t *testing.T) {
	p := project(t)
	known := map[string]bool{}
	for _, s := range config.Settings() {
		known[s[0]] = true
	}
	temporal := service(t, p, "temporal")
	store := service(t, p, "object-store")
	bucket, _ := env(service(t, p, "object-store-bucket"), "S3_BUCKET")
	for name, command := range roles {
		t.Run(name, func(t *testing.T) {
			s := service(t, p, name)
			if got := []string(s.Command); !slices.Equal(got, []string{command}) {
				t.Errorf("command = %q; want [%q]", got, command)
			}
			if s.Build == nil || s.Build.Context != absRoot {
				t.Errorf("build = %+v; want the repository's Dockerfile", s.Build)
			}
			required := []string{"TEMPORAL_ADDRESS", "TRANSCRIBER_BLOB_URL",
				"AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
			switch name {
			case "bot":
				required = append(required, "TELEGRAM_BOT_TOKEN", "TELEGRAM_ALLOWED_USERS")
			case "api":
				required = append(required, "TRANSCRIBER_API_TOKENS")
			}
			for _, k := range required {
				if _, ok := env(s, k); !ok {
					t.Errorf("%s is not set", k)
				}
			}
			for _, k := range slices.Sorted(maps.Keys(s.Environment)) {
				if !known[k] && !strings.HasPrefix(k, "AWS_") {
					t.Errorf("%s is not a setting transcriber knows (internal/config) nor an AWS_ one", k)
				}
			}
			if v, _ := env(s, "TRANSCRIBER_API_TOKENS"); name == "api" && v == "" {
				t.Error("TRANSCRIBER_API_TOKENS is empty")
			}

			// Temporal: the frontend of this stack, by service name and port.
			addr, _ := env(s, "TEMPORAL_ADDRESS")
			host, port, err := net.SplitHostPort(addr)
			if err != nil || host != temporal.Name || !exposes(temporal, port) {
				t.Errorf("TEMPORAL_ADDRESS=%q; want %s:7233, the temporal service's frontend", addr, temporal.Name)
			}

			// Blobs: the bucket object-store-bucket creates, on the store, with
			// the store's credentials.
			blobURL, _ := env(s, "TRANSCRIBER_BLOB_URL")
			u, err := url.Parse(blobURL)
			if err != nil || u.Scheme != "s3" || u.Host != bucket {
				t.Errorf("TRANSCRIBER_BLOB_URL=%q; want s3://%s/..., the bucket object-store-bucket creates", blobURL, bucket)
			}
			endpoint, _ := env(s, "AWS_ENDPOINT_URL")
			eu, err := url.Parse(endpoint)
			if err != nil || eu.Hostname() != store.Name || eu.Port() != "9000" {
				t.Errorf("AWS_ENDPOINT_URL=%q; want http://%s:9000", endpoint, store.Name)
			}
			for k, storeKey := range map[string]string{"AWS_ACCESS_KEY_ID": "MINIO_ROOT_USER", "AWS_SECRET_ACCESS_KEY": "MINIO_ROOT_PASSWORD"} {
				v, _ := env(s, k)
				sv, _ := env(store, storeKey)
				if v == "" || v != sv {
					t.Errorf("%s=%q differs from the store's %s=%q", k, v, storeKey, sv)
				}
			}
		})
	}
}

// exposes reports whether s's container serves port, as the target of a
// published port.
func exposes(s types.ServiceConfig, port string) bool {
	for _, p := range s.Ports {
		if strconv.FormatUint(uint64(p.Target), 10) == port {
			return true
		}
	}
	return false
}

// Scenario: Workers scale without an embedded server or clashing ports
func TestComposeWorkersScale(t *testing.T) {
	p := project(t)
	w := service(t, p, "worker")
	if addr, _ := env(w, "TEMPORAL_ADDRESS"); addr == "" || strings.HasPrefix(addr, "127.") || strings.HasPrefix(addr, "localhost") {
		t.Errorf("worker TEMPORAL_ADDRESS=%q; a worker without an external frontend would look for one on its own loopback", addr)
	}
	if len(w.Ports) > 0 {
		t.Errorf("worker publishes %+v; replicas would clash on the host port", w.Ports)
	}
	if w.ContainerName != "" {
		t.Errorf("worker container_name = %q; a fixed name allows one replica only", w.ContainerName)
	}
	if w.Scale != nil || w.Deploy != nil && w.Deploy.Replicas != nil {
		t.Error("worker fixes its replica count; --scale worker=N should decide it")
	}
	// Only "up" embeds a Temporal server, and this stack runs its own.
	for _, s := range p.Services {
		if slices.Contains(s.Command, "up") {
			t.Errorf("%s runs up, which embeds a Temporal server; run worker, bot or api", s.Name)
		}
	}
	seen := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(p.Services)) {
		for _, port := range p.Services[name].Ports {
			if port.Published == "" {
				continue
			}
			key := port.HostIP + ":" + port.Published + "/" + port.Protocol
			if other, dup := seen[key]; dup {
				t.Errorf("%s and %s both publish %s", other, name, key)
			}
			seen[key] = name
			if port.HostIP != "127.0.0.1" {
				t.Errorf("%s publishes on %q by default; want 127.0.0.1 unless PUBLISH_IP says otherwise", name, port.HostIP)
			}
		}
	}
}

// oneShot reports whether every service that depends on name waits for it
// to complete, which makes it a job rather than a server.
func oneShot(p *types.Project, name string) bool {
	awaited := false
	for _, s := range p.Services {
		if d, ok := s.DependsOn[name]; ok {
			if d.Condition != types.ServiceConditionCompletedSuccessfully {
				return false
			}
			awaited = true
		}
	}
	return awaited
}

func healthy(s types.ServiceConfig) bool {
	return s.HealthCheck != nil && !s.HealthCheck.Disable && len(s.HealthCheck.Test) > 1 && s.HealthCheck.Test[0] != "NONE"
}

// Scenario: Services start in order, each after what it needs is healthy or done
func TestComposeDependencies(t *testing.T) {
	p := project(t)
	for _, name := range slices.Sorted(maps.Keys(p.Services)) {
		s := p.Services[name]
		jobs := oneShot(p, name)
		switch {
		case jobs && s.Restart != "" && s.Restart != types.RestartPolicyNo:
			t.Errorf("%s is a one-shot job but restarts (%q)", name, s.Restart)
		case !jobs && !healthy(s):
			t.Errorf("%s has no health check", name)
		}
		for dep, d := range s.DependsOn {
			target, ok := p.Services[dep]
			if !ok {
				t.Errorf("%s depends on %s, which does not exist", name, dep)
				continue
			}
			switch d.Condition {
			case types.ServiceConditionHealthy:
				if !healthy(target) {
					t.Errorf("%s waits for %s to be healthy, which has no health check", name, dep)
				}
			case types.ServiceConditionCompletedSuccessfully:
				if target.Restart != "" && target.Restart != types.RestartPolicyNo {
					t.Errorf("%s waits for %s to complete, which restarts (%q)", name, dep, target.Restart)
				}
			default:
				t.Errorf("%s depends on %s with condition %q; want it healthy or completed", name, dep, d.Condition)
			}
		}
	}
	// The roles start once the namespace, its search attributes and the
	// bucket exist.
	for name := range roles {
		s := service(t, p, name)
		for _, dep := range []string{"temporal-namespace", "object-store-bucket"} {
			if s.DependsOn[dep].Condition != types.ServiceConditionCompletedSuccessfully {
				t.Errorf("%s does not wait for %s to complete", name, dep)
			}
		}
	}
}

// Scenario: Images are pinned, and Temporal's match the server transcriber is built with
func TestComposeImagesPinned(t *testing.T) {
	p := project(t)
	for _, name := range slices.Sorted(maps.Keys(p.Services)) {
		image := p.Services[name].Image
		ref, digest, _ := strings.Cut(image, "@")
		colon := strings.LastIndex(ref, ":")
		tag := ""
		if colon > strings.LastIndex(ref, "/") {
			tag = ref[colon+1:]
		}
		if digest == "" && (tag == "" || tag == "latest") {
			t.Errorf("%s image %q is not pinned to a version", name, image)
		}
	}
	server := goModVersion(t, "go.temporal.io/server")
	ui := goModVersion(t, "github.com/temporalio/ui-server/v2")
	for name, want := range map[string]string{
		"temporal":           "temporalio/server:" + server,
		"temporal-schema":    "temporalio/admin-tools:" + server,
		"temporal-namespace": "temporalio/admin-tools:" + server,
		"temporal-ui":        "temporalio/ui:" + ui,
	} {
		if got := service(t, p, name).Image; got != want {
			t.Errorf("%s image = %q; want %q, the version go.mod pins", name, got, want)
		}
	}
}

// Scenario: The stack registers the job search attributes before any role starts
func TestComposeRegistersSearchAttributes(t *testing.T) {
	p := project(t)
	ns := service(t, p, "temporal-namespace")
	if got := strings.Join(ns.Entrypoint, " "); !strings.Contains(got, "/deploy/setup-namespace.sh") {
		t.Fatalf("temporal-namespace runs %q; want the namespace script", got)
	}
	script, err := os.ReadFile(filepath.Join(root, "deploy", "temporal", "setup-namespace.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^for name in ([A-Za-z ]+); do\n\ttemporal operator search-attribute create .*--name "\$name" --type Keyword$`).FindSubmatch(script)
	if m == nil {
		t.Fatal("setup-namespace.sh has no loop creating Keyword search attributes")
	}
	got := strings.Fields(string(m[1]))
	slices.Sort(got)
	var want []string
	for name, typ := range workflows.SearchAttributes() {
		if typ != enumspb.INDEXED_VALUE_TYPE_KEYWORD {
			t.Errorf("search attribute %s is %s; the script registers Keywords only", name, typ)
		}
		want = append(want, name)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("setup-namespace.sh registers %q; workflows.SearchAttributes() has %q", got, want)
	}
	if addr, _ := env(ns, "TEMPORAL_ADDRESS"); addr != "temporal:7233" {
		t.Errorf("temporal-namespace TEMPORAL_ADDRESS=%q; want temporal:7233", addr)
	}
	for name := range roles {
		want, _ := env(service(t, p, name), "TEMPORAL_NAMESPACE")
		if got, _ := env(ns, "TEMPORAL_NAMESPACE"); got != want {
			t.Errorf("temporal-namespace creates %q; %s uses %q", got, name, want)
		}
	}
}

// Scenario: Prometheus scrapes every role and the Temporal server, and Grafana shows it
func TestComposeMonitoring(t *testing.T) {
	p := project(t)
	var cfg struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
			DNSSDConfigs []struct {
				Names []string `yaml:"names"`
				Type  string   `yaml:"type"`
				Port  int      `yaml:"port"`
			} `yaml:"dns_sd_configs"`
		} `yaml:"scrape_configs"`
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy", "prometheus", "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	scraped := map[string]bool{}
	for _, sc := range cfg.ScrapeConfigs {
		for _, sd := range sc.DNSSDConfigs {
			for _, n := range sd.Names {
				scraped[net.JoinHostPort(n, strconv.Itoa(sd.Port))] = sd.Type == "A"
			}
		}
		for _, st := range sc.StaticConfigs {
			for _, target := range st.Targets {
				scraped[target] = true
			}
		}
	}
	// Every replica of a role listens where the image's health check looks.
	for name := range roles {
		target := name + ":" + dockerfileHTTPPort(t)
		if !scraped[target] {
			t.Errorf("prometheus does not scrape %s (every replica, through DNS A records)", target)
		}
	}
	promEndpoint, _ := env(service(t, p, "temporal"), "PROMETHEUS_ENDPOINT")
	_, port, _ := net.SplitHostPort(promEndpoint)
	if !scraped["temporal:"+port] || port == "" {
		t.Errorf("prometheus does not scrape the Temporal server's metrics at temporal:%s", port)
	}
	if !mounts(service(t, p, "prometheus"), "deploy/prometheus/prometheus.yml", "/etc/prometheus/prometheus.yml") {
		t.Error("prometheus does not mount deploy/prometheus/prometheus.yml as its configuration")
	}

	// Grafana: the provisioned data source is the one every panel names,
	// and the provider reads the directory the dashboards are mounted at.
	g := service(t, p, "grafana")
	var ds struct {
		Datasources []struct {
			UID  string `yaml:"uid"`
			Type string `yaml:"type"`
			URL  string `yaml:"url"`
		} `yaml:"datasources"`
	}
	readYAML(t, "deploy/grafana/provisioning/datasources/prometheus.yml", &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Fatalf("datasources = %+v; want the compose file's prometheus", ds.Datasources)
	}
	var prov struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, "deploy/grafana/provisioning/dashboards/transcriber.yml", &prov)
	if len(prov.Providers) != 1 || !mounts(g, "deploy/grafana/dashboards", prov.Providers[0].Options.Path) {
		t.Errorf("dashboard provider %+v does not read the mounted deploy/grafana/dashboards", prov.Providers)
	}
	if !mounts(g, "deploy/grafana/provisioning", "/etc/grafana/provisioning") {
		t.Error("grafana does not mount deploy/grafana/provisioning")
	}
	d, err := LoadDashboard(filepath.Join(root, "deploy", "grafana", "dashboards", "transcriber.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range d.Queries() {
		if q.Datasource == nil || q.Datasource.UID != ds.Datasources[0].UID {
			t.Errorf("panel %q query %s uses data source %+v; want uid %q", q.Panel, q.RefID, q.Datasource, ds.Datasources[0].UID)
		}
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// mounts reports whether s bind-mounts the repository path source at
// target.
func mounts(s types.ServiceConfig, source, target string) bool {
	for _, v := range s.Volumes {
		if v.Type == types.VolumeTypeBind && v.Source == filepath.Join(absRoot, source) && v.Target == target {
			return true
		}
	}
	return false
}
