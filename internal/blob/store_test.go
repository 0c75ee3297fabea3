package blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/transcriber/transcriber/internal/blob/s3test"
)

// kind is one Store implementation under the conformance checks.
type kind struct {
	name string
	// open returns an empty store; stores opened with different spaces
	// are isolated from each other.
	open func(t *testing.T, space string) Store
	// leftovers lists everything the store of space keeps, including what
	// readers never see (temporary files, unfinished uploads), so that a
	// check can tell that a failed Put left nothing behind.
	leftovers func(t *testing.T, space string) []string
}

func localKind(t *testing.T) kind {
	root := t.TempDir()
	return kind{
		name: "local",
		open: func(t *testing.T, space string) Store {
			s, err := NewLocal(filepath.Join(root, space))
			if err != nil {
				t.Fatalf("NewLocal: %v", err)
			}
			return s
		},
		leftovers: func(t *testing.T, space string) []string {
			s, err := NewLocal(filepath.Join(root, space))
			if err != nil {
				t.Fatalf("NewLocal: %v", err)
			}
			return files(t, s)
		},
	}
}

// s3Kind opens stores through OpenStore, as the program does, on one
// bucket of a real gateway, one prefix per space.
func s3Kind(t *testing.T) kind {
	srv := s3test.Start(t)
	const bucket = "conformance"
	srv.CreateBucket(t, bucket)
	return kind{
		name: "s3",
		open: func(t *testing.T, space string) Store {
			url := "s3://" + bucket + "/" + space
			s, err := OpenStore(context.Background(), url, "", srv.Getenv(url))
			if err != nil {
				t.Fatalf("OpenStore(%s): %v", url, err)
			}
			if _, ok := s.(*S3); !ok {
				t.Fatalf("OpenStore(%s) = %T; want *S3", url, s)
			}
			return s
		},
		leftovers: func(t *testing.T, space string) []string {
			var out []string
			for _, o := range append(srv.Objects(t, bucket), srv.Uploads(t, bucket)...) {
				if rest, ok := strings.CutPrefix(o, space+"/"); ok {
					out = append(out, rest)
				}
			}
			return out
		},
	}
}

// spaceOf names an isolated space for one subtest.
func spaceOf(t *testing.T) string {
	return strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
}

// allocated is how many bytes of heap f allocates, counting every
// goroutine; the checks run alone, so that is the store's doing.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestStoreConformance holds Local and S3 to the same contract, S3 against
// a real S3-compatible server.
func TestStoreConformance(t *testing.T) {
	for _, k := range []kind{localKind(t), s3Kind(t)} {
		t.Run(k.name, func(t *testing.T) { conformance(t, k) })
	}
}

func conformance(t *testing.T, k kind) {
	ctx := context.Background()

	// Scenario: A job's objects are removed together, and only they
	t.Run("delete job", func(t *testing.T) {
		s := k.open(t, spaceOf(t))
		put(t, s, JobKey("tg-1-2", "original.ogg"), []byte("a"))
		put(t, s, JobKey("tg-1-2", "run-1-1/transcript.json"), []byte("b"))
		put(t, s, JobKey("tg-1-20", "original.ogg"), []byte("c"))
		put(t, s, JobKey("../../etc", "original.ogg"), []byte("d"))
		put(t, s, "chats/1/settings.json", []byte("e"))
		n, err := s.DeleteJob(ctx, "tg-1-2")
		if err != nil || n != 2 {
			t.Fatalf("DeleteJob = %d, %v; want 2 objects", n, err)
		}
		for _, key := range []string{JobKey("tg-1-2", "original.ogg"), JobKey("tg-1-2", "run-1-1/transcript.json")} {
			if _, err := s.Size(ctx, key); !errors.Is(err, ErrNotFound) {
				t.Errorf("Size(%q) after DeleteJob = %v; want ErrNotFound", key, err)
			}
		}
		for _, key := range []string{JobKey("tg-1-20", "original.ogg"), JobKey("../../etc", "original.ogg"), "chats/1/settings.json"} {
			if _, err := s.Size(ctx, key); err != nil {
				t.Errorf("Size(%q) after deleting another job = %v; want it kept", key, err)
			}
		}
		if n, err := s.DeleteJob(ctx, "tg-1-2"); err != nil || n != 0 {
			t.Errorf("DeleteJob again = %d, %v; want 0 and no error", n, err)
		}
	})

	// Scenario: One object is removed alone, and removing it again succeeds
	t.Run("delete one", func(t *testing.T) {
		s := k.open(t, spaceOf(t))
		gone, kept := JobKey("http-1", "original-aa.ogg"), JobKey("http-1", "original-bb.ogg")
		put(t, s, gone, []byte("a"))
		put(t, s, kept, []byte("b"))
		if err := s.Delete(ctx, gone); err != nil {
			t.Fatalf("Delete(%q): %v", gone, err)
		}
		if _, err := s.Size(ctx, gone); !errors.Is(err, ErrNotFound) {
			t.Errorf("Size(%q) after Delete = %v; want ErrNotFound", gone, err)
		}
		if got := read(t, s, kept); string(got) != "b" {
			t.Errorf("the other object of the job reads %q after Delete; want b", got)
		}
		if err := s.Delete(ctx, gone); err != nil {
			t.Errorf("Delete of a removed object = %v; want nil", err)
		}
		if err := s.Delete(ctx, "../outside"); err == nil {
			t.Error("Delete of an invalid key = nil; want an error")
		}
	})

	// Scenario: A stored object reads back the same from either store
	t.Run("round trip", func(t *testing.T) {
		s := k.open(t, spaceOf(t))
		objects := map[string][]byte{
			"empty":                      {},
			"a.txt":                      []byte("hello"),
			"jobs/x/audio.wav":           []byte("RIFF\x00\x01binary\xff"),
			"jobs/.../x":                 []byte("dots"),
			"chats/42/settings.json":     []byte(`{"language":"ru"}`),
			JobKey("../../etc", "a.ogg"): []byte("hostile id"),
		}
		for key, data := range objects {
			put(t, s, key, data)
		}
		for key, data := range objects {
			if got := read(t, s, key); !bytes.Equal(got, data) {
				t.Errorf("Open(%q) = %q; want %q", key, got, data)
			}
			size, err := s.Size(ctx, key)
			if err != nil {
				t.Fatalf("Size(%q): %v", key, err)
			}
			if size != int64(len(data)) {
				t.Errorf("Size(%q) = %d; want %d", key, size, len(data))
			}
		}
		var want []string
		for key := range objects {
			want = append(want, key)
		}
		slices.Sort(want)
		if got := k.leftovers(t, spaceOf(t)); !slices.Equal(got, want) {
			t.Errorf("kept = %q; want exactly %q", got, want)
		}
	})

	// Scenario: A stored object reads back the same from either store
	t.Run("replace", func(t *testing.T) {
		for _, tc := range []struct{ name, first, second string }{
			{"longer by shorter", "a much longer first version", "short"},
			{"shorter by longer", "short", "a much longer second version"},
			{"by empty", "something", ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				s := k.open(t, spaceOf(t))
				put(t, s, "k/v", []byte(tc.first))
				put(t, s, "k/v", []byte(tc.second))
				if got := string(read(t, s, "k/v")); got != tc.second {
					t.Errorf("after second Put, Open = %q; want %q", got, tc.second)
				}
				if got := k.leftovers(t, spaceOf(t)); !slices.Equal(got, []string{"k/v"}) {
					t.Errorf("kept = %q; want only k/v", got)
				}
			})
		}
	})

	// Scenario: A large recording is stored in bounded memory
	t.Run("large object streams", func(t *testing.T) {
		s := k.open(t, spaceOf(t))
		// What a store allocates may depend on its part size but not on the
		// length of the object: a store that held the whole object would
		// allocate 48 MiB more for the larger one.
		const small, large = 16 << 20, 64 << 20
		putAlloc := map[int64]uint64{}
		for _, size := range []int64{small, large} {
			var n int64
			var err error
			putAlloc[size] = allocated(func() { n, err = s.Put(ctx, "jobs/big/audio.raw", &pattern{n: size}) })
			if err != nil {
				t.Fatalf("Put of %d bytes: %v", size, err)
			}
			if n != size {
				t.Fatalf("Put = %d bytes; want %d", n, size)
			}
		}
		if grew := int64(putAlloc[large]) - int64(putAlloc[small]); grew > 8<<20 {
			t.Errorf("Put of %d MiB allocated %d MiB, of %d MiB %d MiB; want the growth under 8 MiB",
				small>>20, putAlloc[small]>>20, large>>20, putAlloc[large]>>20)
		}
		if got, err := s.Size(ctx, "jobs/big/audio.raw"); err != nil || got != large {
			t.Fatalf("Size = %d, %v; want %d", got, err, large)
		}

		want := sha256.New()
		if _, err := io.Copy(want, &pattern{n: large}); err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		readAlloc := allocated(func() {
			rc, err := s.Open(ctx, "jobs/big/audio.raw")
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer rc.Close()
			if _, err := io.Copy(h, rc); err != nil {
				t.Fatalf("read back: %v", err)
			}
		})
		if !bytes.Equal(h.Sum(nil), want.Sum(nil)) {
			t.Errorf("sha256 of content read back = %x; want %x, that of what was put", h.Sum(nil), want.Sum(nil))
		}
		if readAlloc > 8<<20 {
			t.Errorf("reading %d MiB allocated %d MiB; want it streamed, under 8 MiB", large>>20, readAlloc>>20)
		}
	})

	// Scenario: A missing object is reported as not found
	t.Run("missing key", func(t *testing.T) {
		s := k.open(t, spaceOf(t))
		put(t, s, "jobs/x/audio.wav", []byte("a"))
		for _, key := range []string{"nothing/here", "jobs/x/other.wav", "jobs/x/audio.wav/more", "jobs/x", "jobs"} {
			rc, err := s.Open(ctx, key)
			if err == nil {
				rc.Close()
			}
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("Open(%q) error = %v; want ErrNotFound", key, err)
			}
			if _, err := s.Size(ctx, key); !errors.Is(err, ErrNotFound) {
				t.Errorf("Size(%q) error = %v; want ErrNotFound", key, err)
			}
		}
	})

	// Scenario: An unsafe key is refused before storage is touched
	t.Run("invalid keys", func(t *testing.T) {
		s := k.open(t, spaceOf(t))
		for _, key := range []string{"", "/abs", "a//b", "a/", "a/../b", "..", ".", "a\\b", "a\x00b", "../outside"} {
			if _, err := s.Put(ctx, key, strings.NewReader("x")); err == nil || errors.Is(err, ErrNotFound) {
				t.Errorf("Put(%q) error = %v; want a refusal", key, err)
			}
			if rc, err := s.Open(ctx, key); err == nil || errors.Is(err, ErrNotFound) {
				if err == nil {
					rc.Close()
				}
				t.Errorf("Open(%q) error = %v; want a refusal, not a lookup", key, err)
			}
			if _, err := s.Size(ctx, key); err == nil || errors.Is(err, ErrNotFound) {
				t.Errorf("Size(%q) error = %v; want a refusal, not a lookup", key, err)
			}
		}
		if got := k.leftovers(t, spaceOf(t)); len(got) != 0 {
			t.Errorf("kept after refused Puts = %q; want nothing", got)
		}
	})

	// Scenario: A cancelled or failed store leaves the previous object or none
	t.Run("failed put", func(t *testing.T) {
		errBroken := errors.New("connection reset")
		for _, tc := range []struct {
			name    string
			reader  func(cancel context.CancelFunc) io.Reader
			precanc bool
			wantErr error
		}{
			// Past one S3 part, so that a multipart upload is under way.
			{"reader fails after a part", func(context.CancelFunc) io.Reader { return &failingReader{n: 9 << 20, err: errBroken} }, false, errBroken},
			{"reader fails at once", func(context.CancelFunc) io.Reader { return &failingReader{err: errBroken} }, false, errBroken},
			{"context cancelled before", func(context.CancelFunc) io.Reader { return strings.NewReader("data") }, true, context.Canceled},
			{"context cancelled after a part", func(cancel context.CancelFunc) io.Reader {
				return &cancellingReader{n: 9 << 20, cancel: cancel}
			}, false, context.Canceled},
			{"context cancelled in the first part", func(cancel context.CancelFunc) io.Reader {
				return &cancellingReader{n: 1 << 20, cancel: cancel}
			}, false, context.Canceled},
		} {
			for _, existing := range []bool{false, true} {
				name := tc.name + map[bool]string{false: " on nothing", true: " on an object"}[existing]
				t.Run(name, func(t *testing.T) {
					s := k.open(t, spaceOf(t))
					const key = "jobs/j/audio.wav"
					if existing {
						put(t, s, key, []byte("old"))
					}
					ctx, cancel := context.WithCancel(context.Background())
					if tc.precanc {
						cancel()
					}
					n, err := s.Put(ctx, key, tc.reader(cancel))
					cancel()
					if !errors.Is(err, tc.wantErr) {
						t.Fatalf("Put error = %v; want %v", err, tc.wantErr)
					}
					if n != 0 {
						t.Errorf("Put = %d bytes; want 0 on failure", n)
					}
					var want []string
					if existing {
						want = []string{key}
						if got := string(read(t, s, key)); got != "old" {
							t.Errorf("after failed Put, Open = %q; want %q", got, "old")
						}
					} else if _, err := s.Open(context.Background(), key); !errors.Is(err, ErrNotFound) {
						t.Errorf("after failed Put, Open error = %v; want ErrNotFound", err)
					}
					if got := k.leftovers(t, spaceOf(t)); !slices.Equal(got, want) {
						t.Errorf("kept = %q; want %q", got, want)
					}
				})
			}
		}
	})

	// Scenario: Stores under different prefixes do not see each other's objects
	t.Run("isolation", func(t *testing.T) {
		a, b := k.open(t, spaceOf(t)+"-a"), k.open(t, spaceOf(t)+"-b")
		put(t, a, "jobs/x/transcript.json", []byte("from a"))
		put(t, b, "jobs/x/transcript.json", []byte("from b"))
		put(t, a, "only/in/a", []byte("a"))
		if got := string(read(t, a, "jobs/x/transcript.json")); got != "from a" {
			t.Errorf("a: Open = %q; want %q", got, "from a")
		}
		if got := string(read(t, b, "jobs/x/transcript.json")); got != "from b" {
			t.Errorf("b: Open = %q; want %q", got, "from b")
		}
		if _, err := b.Size(ctx, "only/in/a"); !errors.Is(err, ErrNotFound) {
			t.Errorf("b: Size of a's object: error = %v; want ErrNotFound", err)
		}
		if got := k.leftovers(t, spaceOf(t)+"-b"); !slices.Equal(got, []string{"jobs/x/transcript.json"}) {
			t.Errorf("b keeps %q; want only its own jobs/x/transcript.json", got)
		}
	})
}
