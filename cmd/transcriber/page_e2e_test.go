package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/transcriber/transcriber/internal/testaudio"
)

// requireChromium skips, as the other end-to-end tests do for a missing
// tool, when Debian's chromium is not installed.
func requireChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium is not installed; run make test, which installs it")
	return ""
}

// browser is a headless Chromium with a fresh profile.
func browser(t *testing.T, path string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1200, 900),
		// Chromium's sandbox refuses to start as root, which test machines
		// and containers often are.
		chromedp.NoSandbox,
		chromedp.Flag("lang", "en-US"),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	return ctx
}

// artifacts is where the test leaves its screenshots: the directory of
// TRANSCRIBER_TEST_ARTIFACTS when set, so that CI keeps them.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("TRANSCRIBER_TEST_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	dir = filepath.Join(dir, t.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func screenshot(t *testing.T, dir, name string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		// Quality 100 asks for PNG.
		png, err := chromedp.FullScreenshot(100)(ctx, tg)
		if err != nil {
			return err
		}
		path := filepath.Join(dir, name+".png")
		t.Logf("screenshot %s", path)
		return os.WriteFile(path, png, 0o644)
	})
}

// waitText waits until the element's text holds want.
func waitText(sel, want string, timeout time.Duration) chromedp.Action[chromedp.Void] {
	js := `(() => { const el = document.querySelector(` + jsString(sel) + `); return !!el && el.offsetParent !== null && el.textContent.includes(` + jsString(want) + `); })()`
	return pageWait(js, timeout)
}

// pageWait waits until the expression is true in the page.
func pageWait(js string, timeout time.Duration) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Poll[bool](js, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(100*time.Millisecond))(ctx, tg)
		if err != nil {
			return fmt.Errorf("wait for %s: %w", js, err)
		}
		return nil
	})
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func signIn(token string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.CSS(`#signin-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("upload-title")),
	)
}

// value runs an action that returns a value as one step of Do.
func value[T any](a chromedp.Action[T], into *T) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		v, err := a(ctx, tg)
		*into = v
		return err
	})
}

// Scenario: A person signs in, drops a voice note and reads, plays and downloads its transcript
// Scenario: Another account signed in on the same browser finds nothing of the job
func TestPageTranscribesAVoiceNote(t *testing.T) {
	requireSpeechTools(t)
	chromium := requireChromium(t)
	note := testaudio.VoiceNote(t, t.TempDir())
	notAudio := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(notAudio, []byte("these are notes, not a recording\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	u := startUp(t, t.TempDir(), "TRANSCRIBER_API_TOKENS", "alice:ta,bob:tb")
	base := "http://" + u.http
	shots := artifacts(t)
	ctx := browser(t, chromium)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()

	var jobHash string
	var srtHref, srtName chromedp.AttributeResult
	err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		screenshot(t, shots, "1-sign-in"),
		// Russian on request, kept over a reload, and back to English.
		chromedp.SetValue(chromedp.ID("ui-lang"), "ru"),
		value(chromedp.Evaluate[bool](`document.getElementById('ui-lang').dispatchEvent(new Event('change'))`), new(bool)),
		waitText("#signin-title", "Вход", 5*time.Second),
		chromedp.Reload(),
		waitText("#signin-title", "Вход", 5*time.Second),
		pageWait(`document.documentElement.lang === 'ru'`, 5*time.Second),
		screenshot(t, shots, "1-sign-in-ru"),
		chromedp.SetValue(chromedp.ID("ui-lang"), "en"),
		value(chromedp.Evaluate[bool](`document.getElementById('ui-lang').dispatchEvent(new Event('change'))`), new(bool)),
		waitText("#signin-title", "Sign in", 5*time.Second),
		signIn("ta"),
		waitText("#who", "alice", 5*time.Second),
		// What the API refuses, the page says in plain words.
		chromedp.SetUploadFiles(chromedp.ID("file"), []string{notAudio}),
		waitText("#uploads", "Not sent: this file is not a recording that can be read", 10*time.Second),
		chromedp.SetUploadFiles(chromedp.ID("file"), []string{note}),
		// One recording sent opens its job.
		chromedp.WaitVisible(chromedp.ID("job-view")),
		waitText("#segments", testaudio.GoForwardText, time.Minute),
		value(chromedp.Evaluate[string](`location.hash`), &jobHash),
		value(chromedp.AttributeValue(chromedp.ID("dl-srt"), "href"), &srtHref),
		value(chromedp.AttributeValue(chromedp.ID("dl-srt"), "download"), &srtName),
		screenshot(t, shots, "3-job"),
		// A line of the transcript plays the recording from its start and
		// is marked while it plays.
		chromedp.Click(chromedp.CSS("#segments button")),
		pageWait(`document.querySelector('#segments button[aria-current=true]') !== null`, 5*time.Second),
		chromedp.EmulateViewport(390, 844),
		screenshot(t, shots, "5-job-on-a-phone"),
		chromedp.EmulateViewport(1200, 900),
	)
	if err != nil {
		t.Fatalf("alice's visit: %v", err)
	}
	if !strings.HasSuffix(srtName.Value, ".srt") || !strings.Contains(srtHref.Value, "format=srt") {
		t.Errorf("srt link = %q download=%q; want a link to the srt with a .srt name", srtHref.Value, srtName.Value)
	}
	jobID := strings.TrimPrefix(jobHash, "#job/")
	if jobID == "" || jobID == jobHash {
		t.Fatalf("location.hash = %q; want #job/<id>", jobHash)
	}

	// The download works with the page's cookie, as the browser sends it.
	cookies, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/"}})
	if err != nil {
		t.Fatal(err)
	}
	var session *network.Cookie
	for _, c := range cookies.Cookies {
		if c.Name == "transcriber_session" {
			session = c
		}
	}
	if session == nil || !session.HTTPOnly || session.SameSite != network.CookieSameSiteStrict {
		t.Fatalf("session cookie = %+v; want an HttpOnly, SameSite=Strict transcriber_session", session)
	}
	req, _ := http.NewRequest(http.MethodGet, base+srtHref.Value, nil)
	req.AddCookie(&http.Cookie{Name: session.Name, Value: session.Value})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	srt, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(srt), "-->") || !strings.Contains(string(srt), testaudio.GoForwardText) {
		t.Errorf("GET %s with the cookie = %d %q; want the srt", srtHref.Value, resp.StatusCode, srt)
	}

	// The list shows the job too; then alice signs out.
	err = chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(".back")),
		waitText("#job-rows", "Done", 10*time.Second),
		screenshot(t, shots, "2-jobs"),
		chromedp.Click(chromedp.ID("signout")),
		chromedp.WaitVisible(chromedp.ID("token")),
	)
	if err != nil {
		t.Fatalf("alice's list and sign-out: %v", err)
	}

	// Another account signs in on the same browser, with the keyboard only.
	err = chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("token"), "tb"+kb.Enter),
		waitText("#who", "bob", 5*time.Second),
	)
	if err != nil {
		t.Fatalf("bob's sign-in: %v", err)
	}

	t.Run("another account does not find the job", func(t *testing.T) {
		var rows string
		err := chromedp.Do(ctx,
			waitText("#jobs-empty", "No jobs", 10*time.Second),
			value(chromedp.TextContent(chromedp.ID("job-rows")), &rows),
			// Only the fragment changes, so there is no load to wait for.
			value(chromedp.Evaluate[string](`location.hash = `+jsString(jobHash)), new(string)),
			waitText("#job-failure", "no such job", 10*time.Second),
			// Nor does anything of alice's job linger from before.
			pageWait(`document.getElementById('player').getAttribute('src') === null && document.getElementById('job-state').textContent === ''`, 5*time.Second),
			screenshot(t, shots, "4-another-account"),
		)
		if err != nil {
			t.Fatalf("bob's visit: %v", err)
		}
		if strings.Contains(rows, jobID) {
			t.Errorf("bob's jobs list %q; want no %s", rows, jobID)
		}
	})
}

// Scenario: A file chosen right after typing a token, before signing in, is sent once the token signs in
func TestPageSendsAFileChosenRightAfterTheToken(t *testing.T) {
	requireSpeechTools(t)
	chromium := requireChromium(t)
	t.Parallel()
	note := testaudio.VoiceNote(t, t.TempDir())
	u := startUp(t, t.TempDir(), "TRANSCRIBER_API_TOKENS", "alice:ta,bob:tb")
	ctx := browser(t, chromium)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var srt []string
	err := chromedp.Do(ctx,
		chromedp.Navigate("http://"+u.http+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		// Typed, not submitted: the next thing the person does is choose
		// the recording.
		chromedp.SendKeys(chromedp.ID("token"), "ta"),
		chromedp.SetUploadFiles(chromedp.ID("file"), []string{note}),
		pageWait(`document.body.innerText.includes(`+jsString(testaudio.GoForwardText)+`)`, time.Minute),
		value(chromedp.Evaluate[[]string](`[...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href')).filter(h => h.includes('format=srt'))`), &srt),
		screenshot(t, artifacts(t), "sent-before-sign-in"),
	)
	if err != nil {
		t.Fatal(err)
	}
	if len(srt) == 0 {
		t.Error("no link to an .srt download on the page")
	}
}
