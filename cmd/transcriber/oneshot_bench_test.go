package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/transcriber/transcriber/internal/testaudio"
)

// oneShotRounds is how many side-by-side runs each figure is the median of.
const oneShotRounds = 5

// BenchmarkOneShotTranscribe runs `transcriber transcribe` on a LibriVox
// WAV as a new user would (the built binary, embedded server, local engine,
// a fresh data directory each time) and, side by side, what it stands for:
// ffmpeg converting the file as the pipeline does and pocketsphinx
// recognising it with the engine's arguments. It reports the median extra
// time of the whole process and the ratio of the medians; issue #15's bar is
// at most 0.5 s extra.
func BenchmarkOneShotTranscribe(b *testing.B) {
	requireSpeechTools(b)
	bin := transcriberBinary(b)
	wav := testaudio.LibriVox("sense_and_sensibility_01_austen_64kb-0870")
	for b.Loop() {
		var direct, oneShot []time.Duration
		for range oneShotRounds {
			direct = append(direct, timed(b, func() { convertAndRecognise(b, wav) }))
			oneShot = append(oneShot, timed(b, func() {
				cmd := exec.Command(bin, "transcribe", wav)
				cmd.Env = append(os.Environ(), "TRANSCRIBER_DATA_DIR="+b.TempDir(), "TEMPORAL_ADDRESS=")
				if out, err := cmd.CombinedOutput(); err != nil || !bytes.Contains(bytes.ToLower(out), []byte("the")) {
					b.Fatalf("transcribe: %v\n%s", err, out)
				}
			}))
		}
		d, o := median(direct), median(oneShot)
		b.ReportMetric(float64((o - d).Milliseconds()), "extra-ms")
		b.ReportMetric(o.Seconds()/d.Seconds(), "x-direct")
		b.Logf("one-shot transcribe %v, direct ffmpeg + pocketsphinx %v (medians of %d): %v extra, %.2fx (bar: at most 500 ms extra)",
			o.Round(time.Millisecond), d.Round(time.Millisecond), oneShotRounds, (o - d).Round(time.Millisecond), o.Seconds()/d.Seconds())
	}
}

// convertAndRecognise is the work of a one-shot job without the job.
func convertAndRecognise(b *testing.B, wav string) {
	b.Helper()
	out := filepath.Join(b.TempDir(), "audio.wav")
	testaudio.FFmpeg(b, "-nostdin", "-v", "error", "-i", wav, "-map", "0:a:0", "-ac", "1", "-ar", "16000", "-c:a", "pcm_s16le", out)
	model := "/usr/share/pocketsphinx/model/en-us"
	cmd := exec.Command("pocketsphinx_continuous", "-infile", out,
		"-hmm", filepath.Join(model, "en-us"), "-lm", filepath.Join(model, "en-us.lm.bin"), "-dict", filepath.Join(model, "cmudict-en-us.dict"),
		"-time", "yes", "-logfn", os.DevNull)
	if o, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("pocketsphinx: %v\n%s", err, o)
	}
}

func timed(b *testing.B, f func()) time.Duration {
	b.Helper()
	start := time.Now()
	f()
	return time.Since(start)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkLongRecordingPeakMemory sends a one-minute and a one-hour
// recording, each to a fresh `up` process (the built binary) whose engine is
// an OpenAI-compatible server in another process that answers at once, and
// reads the service's peak resident memory (VmHWM) once the job is done. It
// reports both and their ratio: the service streams audio through files and
// the blob store, so an hour should cost about what a minute does.
func BenchmarkLongRecordingPeakMemory(b *testing.B) {
	requireSpeechTools(b)
	bin := transcriberBinary(b)
	engine := startFixedLatencyEngine(b, 0)
	dir := b.TempDir()
	minute, hour := filepath.Join(dir, "minute.flac"), filepath.Join(dir, "hour.flac")
	for p, d := range map[string]int{minute: 60, hour: 3600} {
		testaudio.FFmpeg(b, "-f", "lavfi", "-i", fmt.Sprintf("anoisesrc=d=%d:c=pink:r=16000:a=0.02", d), "-c:a", "flac", p)
	}
	for b.Loop() {
		short, long := peakRSS(b, bin, engine, minute), peakRSS(b, bin, engine, hour)
		b.ReportMetric(float64(short)/(1<<20), "minute-peak-MB")
		b.ReportMetric(float64(long)/(1<<20), "hour-peak-MB")
		b.ReportMetric(float64(long)/float64(short), "x-minute")
		b.Logf("peak resident memory of up: %.0f MB for a one-hour recording, %.0f MB for a one-minute one (%.2fx)",
			float64(long)/(1<<20), float64(short)/(1<<20), float64(long)/float64(short))
	}
}

// peakRSS runs one job through a fresh up and returns the process's peak
// resident set.
func peakRSS(b *testing.B, bin, engine, recording string) int64 {
	b.Helper()
	base := "http://" + listenAddr(b)
	cmd := exec.Command(bin, "up")
	cmd.Env = append(os.Environ(), "TRANSCRIBER_DATA_DIR="+b.TempDir(), "TRANSCRIBER_HTTP_ADDR="+strings.TrimPrefix(base, "http://"),
		"TRANSCRIBER_UI_ADDR=off", "TEMPORAL_ADDRESS=", "TRANSCRIBER_TEMPORAL_PORT="+strconv.Itoa(listenPort(b)),
		"TRANSCRIBER_ENGINE=openai", "OPENAI_BASE_URL="+engine, "OPENAI_API_KEY=bench", "TRANSCRIBER_API_TOKENS="+benchToken,
		// The hour goes through as six chunks, cut and sent one after
		// another, as long speech does; the minute as itself.
		"TRANSCRIBER_CHUNK_DURATION=10m")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}()
	benchWaitReady(b, base)
	f, err := os.Open(recording)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = f.Close() }() // only read
	id := submitJob(b, base, f)
	for deadline := time.Now().Add(20 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		st := jobState(b, base, id)
		if st == "done" {
			break
		}
		if st == "failed" || st == "dead" || time.Now().After(deadline) {
			b.Fatalf("job %s of %s is %s\n%s", id, recording, st, logs.String())
		}
	}
	return vmHWM(b, cmd.Process.Pid)
}

// submitJob posts a recording to the job API and returns the job's id.
func submitJob(b *testing.B, base string, body io.Reader) string {
	b.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/jobs", body)
	req.Header.Set("Authorization", "Bearer "+benchToken)
	req.Header.Set("Content-Type", "audio/flac")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var a struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != http.StatusAccepted {
		b.Fatalf("submit: %d %v", resp.StatusCode, err)
	}
	return a.ID
}

// vmHWM reads a process's peak resident set from /proc.
func vmHWM(b *testing.B, pid int) int64 {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = f.Close() }() // only read
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmHWM in /proc status")
	return 0
}
