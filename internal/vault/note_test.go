package vault

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const personsNote = `---
title: Standup   # the person's comment
tags:
  - work
  - voice
voice-id: a
voice-status: saved
voice-device: mac
voice-attempts: 0
---
![[voice/source/a.ogg]]

My own words stay here.
`

// Scenario: A write changes only the intake's keys and the transcript
func TestSetFieldsKeepsThePersonsKeysByteForByte(t *testing.T) {
	at := time.Date(2026, 12, 1, 14, 15, 3, 0, time.UTC)
	f := Fields{ID: "a", Status: Retry, Device: "mac", Attempts: 1, NextAttempt: at.Add(30 * time.Second),
		SentAt: at, Error: `service_error: "overloaded": try again`}
	out, err := setFields([]byte(personsNote), f)
	if err != nil {
		t.Fatal(err)
	}
	got := string(out)
	for _, keep := range []string{"title: Standup   # the person's comment\n", "tags:\n  - work\n  - voice\n",
		"---\n![[voice/source/a.ogg]]\n\nMy own words stay here.\n"} {
		if !strings.Contains(got, keep) {
			t.Errorf("lost %q:\n%s", keep, got)
		}
	}
	for _, want := range []string{"voice-status: retry\n", "voice-attempts: 1\n", "voice-next-attempt: 2026-12-01T14:15:33Z\n",
		"voice-sent-at: 2026-12-01T14:15:03Z\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q:\n%s", want, got)
		}
	}
	n, err := parseNote("a.md", out)
	if err != nil {
		t.Fatal(err)
	}
	if n.Fields != f.normalised() {
		t.Errorf("read back %+v; want %+v", n.Fields, f)
	}
	// Clearing a field removes its key; the rest stays.
	f.Status, f.NextAttempt, f.Error = Sent, time.Time{}, ""
	out, err = setFields(out, f)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out); strings.Contains(got, KeyNextAttempt) || strings.Contains(got, KeyError) || !strings.Contains(got, "tags:\n  - work") {
		t.Errorf("after clearing:\n%s", got)
	}
}

func TestParseNoteReadsWhatPeopleAndToolsWrite(t *testing.T) {
	for name, front := range map[string]string{
		"bare":   "voice-id: a\nvoice-status: retry\nvoice-attempts: 2\nvoice-next-attempt: 2026-12-01T14:15:33Z\n",
		"quoted": "voice-id: \"a\"\nvoice-status: 'retry'\nvoice-attempts: \"2\"\nvoice-next-attempt: \"2026-12-01T14:15:33Z\"\n",
	} {
		n, err := parseNote("x.md", []byte("---\r\n"+front+"---\r\nbody"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := Fields{ID: "a", Status: Retry, Attempts: 2, NextAttempt: time.Date(2026, 12, 1, 14, 15, 33, 0, time.UTC)}
		if !n.NextAttempt.Equal(want.NextAttempt) || n.ID != want.ID || n.Status != want.Status || n.Attempts != 2 {
			t.Errorf("%s: %+v; want %+v", name, n.Fields, want)
		}
	}
	if _, err := parseNote("x.md", []byte("# just a note\nvoice-id: a\n")); !errors.Is(err, errNoFrontmatter) {
		t.Errorf("a note without frontmatter: %v", err)
	}
	if _, err := parseNote("x.md", []byte("---\ntitle: [unclosed\nvoice-id: a\n---\n")); err == nil || errors.Is(err, errNoFrontmatter) {
		t.Errorf("broken YAML: %v; want an error that says so", err)
	}
}

// Scenario: A change the lifecycle does not have is refused and changes nothing
func TestTransitionsOutsideTheLifecycleAreRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.md")
	content := strings.Replace(personsNote, "voice-status: saved", "voice-status: inserted", 1)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := parseNote(path, []byte(content))
	if err != nil {
		t.Fatal(err)
	}
	in := &Intake{cfg: Config{Dir: dir}}
	f := n.Fields
	f.Status, f.SentAt = Sent, time.Now()
	if err := in.update(n, f, nil); !errors.Is(err, ErrTransition) {
		t.Errorf("inserted → sent: %v; want ErrTransition", err)
	}
	if b, _ := os.ReadFile(path); string(b) != content {
		t.Errorf("the refused change altered the note:\n%s", b)
	}
	for from, tos := range transitions {
		for _, to := range tos {
			if err := checkTransition(from, to); err != nil {
				t.Errorf("%s → %s: %v", from, to, err)
			}
		}
	}
	if err := checkTransition(Saved, "transcribed"); err == nil {
		t.Error("saved → transcribed allowed; it never reaches a note")
	}
}

// Scenario: An edit made while a write was prepared survives
func TestWriteNoteNeverOverwritesAnEditMadeMeanwhile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.md")
	if err := os.WriteFile(path, []byte(personsNote), 0o600); err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(personsNote, "title: Standup", "title: Standup\nmood: good", 1)
	if err := os.WriteFile(path, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := writeNote(path, []byte(personsNote), []byte("replaced")); !errors.Is(err, errNoteChanged) {
		t.Fatalf("write over an edit: %v; want errNoteChanged", err)
	}
	if b, _ := os.ReadFile(path); string(b) != edited {
		t.Errorf("the edit was lost:\n%s", b)
	}
	if err := writeNote(path, []byte(edited), []byte("replaced")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode after write: %v, %v; want the note's own", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("files left beside the note: %v", entries)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := writeNote(path, []byte(edited), []byte("x")); !errors.Is(err, ErrNoteGone) {
		t.Errorf("write of a deleted note: %v; want ErrNoteGone", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Error("a write recreated a deleted note")
	}
}

func TestInsertAfterEmbed(t *testing.T) {
	got := string(insertAfterEmbed([]byte(personsNote), []string{"[[voice/source/a.ogg"}, " go forward ten meters \n"))
	want := "---\n![[voice/source/a.ogg]]\n\ngo forward ten meters\n\nMy own words stay here.\n"
	if !strings.HasSuffix(got, want) {
		t.Errorf("after the embed:\n%s", got)
	}
	got = string(insertAfterEmbed([]byte("---\nvoice-id: a\n---\nno link here"), []string{"[[a.ogg"}, "text"))
	if !strings.HasSuffix(got, "no link here\n\ntext\n") {
		t.Errorf("without the embed:\n%q", got)
	}
}

// Scenario: The device id is kept outside the vault
func TestDevice(t *testing.T) {
	dir := t.TempDir()
	a, err := Device("", dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Device("", dir)
	if err != nil || a != b || CheckDevice(a) != nil {
		t.Errorf("device ids %q, %q (%v); want one valid id kept", a, b, err)
	}
	if d, err := Device("phone", dir); err != nil || d != "phone" {
		t.Errorf("named device: %q, %v", d, err)
	}
	if _, err := Device("my phone/1", dir); err == nil {
		t.Error("a device id with a space and a slash was taken")
	}
}

func TestClock(t *testing.T) {
	for d, want := range map[time.Duration]string{47 * time.Second: "0:47", 12*time.Minute + 5*time.Second: "12:05",
		time.Hour + 2*time.Minute + 3*time.Second: "1:02:03"} {
		if got := clock(d); got != want {
			t.Errorf("clock(%v) = %q; want %q", d, got, want)
		}
	}
}

func TestMessagesSpeakTheVaultsLanguage(t *testing.T) {
	if got := messagesFor("ru-RU").noSpeech; got != "В записи не распознано речи." {
		t.Errorf("Russian no-speech message = %q", got)
	}
	for _, l := range []string{"", "en", "de"} {
		if got := messagesFor(l).noSpeech; got != "No speech was recognised in this recording." {
			t.Errorf("messagesFor(%q).noSpeech = %q; want English", l, got)
		}
	}
	revived := []byte("---\nvoice-id: a\n---\n![[a.ogg]]\n\n" + catalog["ru"].noSpeech + "\n\nmine\n")
	if got := string(dropNoSpeech(revived)); strings.Contains(got, catalog["ru"].noSpeech) || !strings.Contains(got, "mine") {
		t.Errorf("dropNoSpeech:\n%s", got)
	}
}

func TestPartialAndHiddenFilesAreNotRecordings(t *testing.T) {
	for name, want := range map[string]bool{
		"a.ogg": true, "B.M4A": true, "talk.webm": true, "notes.md": false, ".a.ogg": false, "a.ogg.part": false,
		"a.ogg.crdownload": false, "a.ogg~": false, "~a.ogg": false, "a.ogg.tmp": false, "a.txt": false,
	} {
		if got := isAudioName(name); got != want {
			t.Errorf("isAudioName(%q) = %v; want %v", name, got, want)
		}
	}
}
