package main

// The split topology without Docker: a PostgreSQL the test starts,
// "transcriber server" on it, and two workers, the bot and the API, each its
// own OS process of the built binary, sharing one data directory for the
// recordings. A worker is killed with SIGKILL in the middle of a
// recognition, and the server process is killed and started again.

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/transcriber/transcriber/internal/devserver/pgtest"
	"github.com/transcriber/transcriber/internal/telegram/telegramtest"
	"github.com/transcriber/transcriber/internal/testaudio"
	"github.com/transcriber/transcriber/workflows"
)

// engineRouter stands between the workers and the engine stand-in. Each
// worker's OPENAI_BASE_URL starts with the worker's name, so the router
// knows which process sent each recognition request.
type engineRouter struct {
	*httptest.Server
	mu   sync.Mutex
	from []string
}

func newEngineRouter(t *testing.T, engineURL string) *engineRouter {
	t.Helper()
	target, err := url.Parse(engineURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		// A request whose worker was killed ends here; that is the test,
		// not a failure worth a log line.
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) },
	}
	r := &engineRouter{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		name, rest, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/")
		r.mu.Lock()
		r.from = append(r.from, name)
		r.mu.Unlock()
		req.URL.Path, req.URL.RawPath = "/"+rest, ""
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

// baseURL is the OPENAI_BASE_URL of the named worker.
func (r *engineRouter) baseURL(worker string) string { return r.URL + "/" + worker + "/v1" }

// senders names the worker of every request so far, in arrival order.
func (r *engineRouter) senders() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.from)
}

// startServerProc runs "transcriber server" and waits until it serves.
func startServerProc(t *testing.T, environ []string) *proc {
	t.Helper()
	p := startProc(t, environ, "server")
	waitFor(t, "the temporal server to start", func() bool {
		select {
		case <-p.done:
			t.Fatalf("transcriber server exited:\n%s", p.logs.String())
		default:
		}
		return strings.Contains(p.logs.String(), "temporal server is running")
	})
	return p
}

// waitReady waits until a role process answers /readyz, which checks its
// connection to Temporal.
func waitReady(t *testing.T, p *proc, addr string) {
	t.Helper()
	waitFor(t, p.cmd.Args[1]+" to be ready", func() bool {
		select {
		case <-p.done:
			t.Fatalf("transcriber %s exited:\n%s", p.cmd.Args[1], p.logs.String())
		default:
		}
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// Scenario: Separate server, worker, bot and API processes on PostgreSQL finish a job whose worker was killed, exactly once
func TestTopologyWithoutDocker(t *testing.T) {
	requireSpeechTools(t)
	t.Parallel()
	pg := pgtest.Start(t)
	dbRole := pg.NewRole(t, true)
	dbURL := pg.URL(dbRole, pg.NewDatabase(t, dbRole))
	engine := newBlockingEngine(t, testaudio.GoForwardText)
	router := newEngineRouter(t, engine.URL)
	tg := telegramtest.New(t, botToken)
	dataDir := t.TempDir()
	temporal := "127.0.0.1:" + strconv.Itoa(freePort(t))
	_, temporalPort, _ := strings.Cut(temporal, ":")

	serverEnv := []string{
		"TRANSCRIBER_DB=" + dbURL,
		"TRANSCRIBER_TEMPORAL_PORT=" + temporalPort,
		"TRANSCRIBER_UI_ADDR=off",
		"TRANSCRIBER_DATA_DIR=" + dataDir,
	}
	server := startServerProc(t, serverEnv)
	if !strings.Contains(server.logs.String(), `database="postgres://`+dbRole.Name+"@") {
		t.Errorf("the server does not say it runs on PostgreSQL:\n%s", server.logs.String())
	}

	common := []string{
		"TEMPORAL_ADDRESS=" + temporal,
		"TRANSCRIBER_DATA_DIR=" + dataDir,
		"TRANSCRIBER_ENGINE=openai",
		"TRANSCRIBER_RETRY_SCHEDULE=1s",
		"TELEGRAM_BOT_TOKEN=" + botToken,
		"TELEGRAM_API_ENDPOINT=" + tg.URL(),
	}
	start := func(name string, extra ...string) (*proc, string) {
		addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
		p := startProc(t, append(append(slices.Clone(common), "TRANSCRIBER_HTTP_ADDR="+addr), extra...), name)
		return p, addr
	}
	workers := map[string]*proc{}
	var procs []*proc
	for _, name := range []string{"a", "b"} {
		p, addr := start("worker", "OPENAI_BASE_URL="+router.baseURL(name))
		waitReady(t, p, addr)
		workers[name] = p
		procs = append(procs, p)
	}
	bot, botAddr := start("bot", "TELEGRAM_ALLOWED_USERS="+strconv.FormatInt(owner.ID, 10))
	// An admin, to see the Telegram job beside its own.
	api, apiAddr := start("api", "TRANSCRIBER_API_TOKENS=ops:"+apiToken, "TRANSCRIBER_ADMINS=ops")
	waitReady(t, bot, botAddr)
	waitReady(t, api, apiAddr)
	procs = append(procs, bot, api)
	base := "http://" + apiAddr

	c, err := client.Dial(client.Options{HostPort: temporal})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	note := voiceNoteBytes(t)
	body, ct := multipartUpload(t, "voice.ogg", note, "language", "en")
	res := apiDo(t, http.MethodPost, base+"/v1/jobs", apiToken, body, "Content-Type", ct, "Idempotency-Key", "topology-1")
	if res.status != http.StatusAccepted {
		t.Fatalf("POST /v1/jobs = %d %s; want 202", res.status, res.body)
	}
	var job accepted
	res.json(t, &job)
	select {
	case <-engine.inFlight:
	case <-time.After(2 * time.Minute):
		t.Fatal("the job's recognition never reached the engine")
	}
	holder := router.senders()[0]
	survivor := map[string]string{"a": "b", "b": "a"}[holder]
	if err := workers[holder].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-workers[holder].done
	engine.unblock()

	// A recording sent to the bot while a worker is down.
	voice := tg.PushVoice(owner, tg.AddFile(note, "voice/file.oga"), 3, 8138)
	waitShown(t, tg, voice.ChatID, "the transcript of the Telegram job", quotes(voice, testaudio.GoForwardText))

	if done := waitState(t, base, job.ID, "done"); done.Failure != nil {
		t.Errorf("job %s = %+v; want done without a failure", job.ID, done)
	}
	if tr := apiDo(t, http.MethodGet, base+"/v1/jobs/"+job.ID+"/transcript", apiToken, nil); tr.status != http.StatusOK ||
		strings.TrimSpace(tr.body) != testaudio.GoForwardText {
		t.Errorf("transcript = %d %q", tr.status, tr.body)
	}
	tgJob := workflows.TelegramJobID(voice.ChatID, voice.MessageID)
	for _, id := range []string{job.ID, tgJob} {
		if got := completions(t, c, id); got["Recognize"] != 1 {
			t.Errorf("%s: completed steps = %v; want recognition accepted exactly once", id, got)
		}
		if n := len(transcriptFiles(t, filepath.Join(dataDir, "blobs", "jobs", id))); n != 1 {
			t.Errorf("%s: %d transcripts stored; want 1", id, n)
		}
	}
	// The killed worker sent the lost request and nothing else; the
	// survivor sent the retry and the Telegram job's request.
	from := router.senders()
	if n := len(slices.DeleteFunc(slices.Clone(from), func(w string) bool { return w != holder })); n != 1 || len(from) != 3 {
		t.Errorf("engine requests came from workers %v; want %s once (the lost call) and %s twice", from, holder, survivor)
	}
	if n := engine.count(); n != 3 {
		t.Errorf("engine requests = %d; want 3", n)
	}
	time.Sleep(2 * time.Second) // a duplicate reply would have gone out by now
	if n := len(showing(tg, voice.ChatID, testaudio.GoForwardText)); n != 1 {
		t.Errorf("Telegram transcript shown in %d messages; want one", n)
	}

	// Scenario: Jobs kept in PostgreSQL outlive a restart of the server process
	t.Run("server restart", func(t *testing.T) {
		server.kill()
		server = startServerProc(t, serverEnv)
		// The API, the worker and the bot reconnect by themselves.
		if j := waitState(t, base, job.ID, "done"); j.ID != job.ID {
			t.Errorf("job after restart = %+v", j)
		}
		list := apiDo(t, http.MethodGet, base+"/v1/jobs", apiToken, nil)
		if list.status != http.StatusOK || !strings.Contains(list.body, `"`+job.ID+`"`) || !strings.Contains(list.body, `"`+tgJob+`"`) {
			t.Errorf("GET /v1/jobs after restart = %d %s; want both jobs", list.status, list.body)
		}
		if tr := apiDo(t, http.MethodGet, base+"/v1/jobs/"+job.ID+"/transcript", apiToken, nil); strings.TrimSpace(tr.body) != testaudio.GoForwardText {
			t.Errorf("transcript after restart = %d %q", tr.status, tr.body)
		}
		// And new work runs on the restarted server.
		again := tg.PushVoice(owner, tg.AddFile(note, "voice/again.oga"), 3, 8138)
		waitShown(t, tg, again.ChatID, "the transcript of a job after the restart", quotes(again, testaudio.GoForwardText))
	})

	if _, err := os.Stat(filepath.Join(dataDir, "temporal.db")); !os.IsNotExist(err) {
		t.Errorf("the server on PostgreSQL made a SQLite file: %v", err)
	}
	for _, p := range append(procs, server) {
		logs := p.logs.String()
		for what, secret := range map[string]string{"database password": dbRole.Password, "API token": apiToken,
			"bot token": botToken, "transcript": testaudio.GoForwardText} {
			if strings.Contains(logs, secret) {
				t.Errorf("the log of %s holds the %s", p.cmd.Args[1], what)
			}
		}
	}
}

// Scenario: up keeps its Temporal state in PostgreSQL when TRANSCRIBER_DB names one
func TestUpOnPostgres(t *testing.T) {
	requireSpeechTools(t)
	t.Parallel()
	pg := pgtest.Start(t)
	dbRole := pg.NewRole(t, true)
	database := pg.NewDatabase(t, dbRole)
	dataDir := t.TempDir()
	u := startUp(t, dataDir, "TRANSCRIBER_DB", pg.URL(dbRole, database), "TRANSCRIBER_UI_ADDR", "off")
	r := runCLI(t, u.client, "transcribe", testaudio.VoiceNote(t, t.TempDir()))
	if r.code != 0 || strings.TrimSpace(r.stdout) != testaudio.GoForwardText {
		t.Fatalf("transcribe through up on PostgreSQL: code %d, out %q, err:\n%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "temporal.db")); !os.IsNotExist(err) {
		t.Errorf("up on PostgreSQL made a SQLite file: %v", err)
	}
	var jobs int
	pg.Query(t, database, "SELECT count(*) FROM executions WHERE workflow_id LIKE 'cli-%'", &jobs)
	if jobs != 1 {
		t.Errorf("PostgreSQL holds %d jobs; want the one transcribed", jobs)
	}
	logs := u.logs.String()
	if !strings.Contains(logs, `database="postgres://`+dbRole.Name+"@") || strings.Contains(logs, dbRole.Password) {
		t.Errorf("up's log should name the database without its password:\n%s", logs)
	}
}
