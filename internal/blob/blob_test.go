package blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func newStore(t *testing.T) *Local {
	t.Helper()
	s, err := NewLocal(t.TempDir())
	if err != nil {
		t.Fatalf("NewLocal: %v", err)
	}
	return s
}

func put(t *testing.T, s Store, key string, data []byte) {
	t.Helper()
	n, err := s.Put(context.Background(), key, bytes.NewReader(data))
	if err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
	if n != int64(len(data)) {
		t.Fatalf("Put(%q) = %d bytes; want %d", key, n, len(data))
	}
}

func read(t *testing.T, s Store, key string) []byte {
	t.Helper()
	rc, err := s.Open(context.Background(), key)
	if err != nil {
		t.Fatalf("Open(%q): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %q: %v", key, err)
	}
	return b
}

// files lists every regular file under the root, relative and slash-separated,
// so a test sees temp files wherever a Put might have left them.
func files(t *testing.T, s *Local) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(s.Root(), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(s.Root(), p)
		out = append(out, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatalf("walk store: %v", err)
	}
	return out
}

func TestNewLocalCreatesAbsoluteRoot(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	s, err := NewLocal(dir)
	if err != nil {
		t.Fatalf("NewLocal: %v", err)
	}
	if !filepath.IsAbs(s.Root()) {
		t.Errorf("Root() = %q; want an absolute path", s.Root())
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Errorf("root directory after NewLocal: stat err = %v; want an existing directory", err)
	}
}

func TestPutOpenRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		key  string
		data []byte
	}{
		{name: "empty object", key: "empty", data: []byte{}},
		{name: "top-level key", key: "a.txt", data: []byte("hello")},
		{name: "nested key creates directories", key: "jobs/x/audio.wav", data: []byte("RIFF\x00\x01binary\xff")},
		{name: "dot-dot-dot segment is a plain name", key: "jobs/.../x", data: []byte("dots")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			put(t, s, tc.key, tc.data)
			if got := read(t, s, tc.key); !bytes.Equal(got, tc.data) {
				t.Errorf("Open(%q) = %q; want %q", tc.key, got, tc.data)
			}
			size, err := s.Size(context.Background(), tc.key)
			if err != nil {
				t.Fatalf("Size(%q): %v", tc.key, err)
			}
			if size != int64(len(tc.data)) {
				t.Errorf("Size(%q) = %d; want %d", tc.key, size, len(tc.data))
			}
			if got := files(t, s); len(got) != 1 || got[0] != tc.key {
				t.Errorf("files in store = %q; want only %q", got, tc.key)
			}
		})
	}
}

// A recording is stored for good only once the name of every directory
// made for it is synced in its parent, and the recording's own name in its
// directory.
func TestPutSyncsTheDirectoriesItMakes(t *testing.T) {
	s := newStore(t)
	var synced []string
	real := syncDir
	syncDir = func(dir string) error {
		synced = append(synced, dir)
		return real(dir)
	}
	defer func() { syncDir = real }()

	put(t, s, "jobs/x/original.ogg", []byte("OggS"))
	root := s.Root()
	want := []string{root, filepath.Join(root, "jobs"), filepath.Join(root, "jobs", "x")}
	if !slices.Equal(synced, want) {
		t.Errorf("synced %q; want %q: the parent of each new directory, then the recording's own", synced, want)
	}

	synced = nil
	put(t, s, "jobs/x/audio.flac", []byte("fLaC"))
	if want := []string{filepath.Join(root, "jobs", "x")}; !slices.Equal(synced, want) {
		t.Errorf("into an existing directory, synced %q; want %q", synced, want)
	}
}

func TestPutReplaces(t *testing.T) {
	tests := []struct {
		name          string
		first, second string
	}{
		{name: "longer by shorter", first: "a much longer first version", second: "short"},
		{name: "shorter by longer", first: "short", second: "a much longer second version"},
		{name: "by empty", first: "something", second: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			put(t, s, "k/v", []byte(tc.first))
			put(t, s, "k/v", []byte(tc.second))
			if got := string(read(t, s, "k/v")); got != tc.second {
				t.Errorf("after second Put, Open = %q; want %q", got, tc.second)
			}
			if got := files(t, s); len(got) != 1 {
				t.Errorf("files in store = %q; want only k/v", got)
			}
		})
	}
}

// pattern yields n deterministic bytes without holding them, so a large Put
// exercises streaming rather than a big slice.
type pattern struct {
	n, off int64
}

func (p *pattern) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, io.EOF
	}
	if rem := p.n - p.off; int64(len(b)) > rem {
		b = b[:rem]
	}
	for i := range b {
		x := p.off + int64(i)
		b[i] = byte(x ^ x>>8 ^ x>>16)
	}
	p.off += int64(len(b))
	return len(b), nil
}

func TestPutLargeStream(t *testing.T) {
	const size = 50 << 20
	s := newStore(t)
	n, err := s.Put(context.Background(), "jobs/big/audio.raw", &pattern{n: size})
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	if n != size {
		t.Errorf("Put = %d bytes; want %d", n, size)
	}
	got, err := s.Size(context.Background(), "jobs/big/audio.raw")
	if err != nil {
		t.Fatalf("Size: %v", err)
	}
	if got != size {
		t.Errorf("Size = %d; want %d", got, size)
	}

	want := sha256.New()
	if _, err := io.Copy(want, &pattern{n: size}); err != nil {
		t.Fatal(err)
	}
	rc, err := s.Open(context.Background(), "jobs/big/audio.raw")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer rc.Close()
	h := sha256.New()
	if _, err := io.Copy(h, rc); err != nil {
		t.Fatalf("read back: %v", err)
	}
	if !bytes.Equal(h.Sum(nil), want.Sum(nil)) {
		t.Errorf("sha256 of content read back = %x; want %x, that of what was put", h.Sum(nil), want.Sum(nil))
	}
}

// failingReader yields n bytes and then err, like a network upload that
// breaks midway.
type failingReader struct {
	n   int
	err error
}

func (r *failingReader) Read(b []byte) (int, error) {
	if r.n == 0 {
		return 0, r.err
	}
	k := min(len(b), r.n)
	for i := range b[:k] {
		b[i] = 'x'
	}
	r.n -= k
	return k, nil
}

// cancellingReader cancels its own context after n bytes, so the store sees
// the cancellation in the middle of a copy. It ends a little later, so a
// store that ignores the context finishes (and fails the test) instead of
// filling the disk.
type cancellingReader struct {
	n      int
	cancel context.CancelFunc
}

func (r *cancellingReader) Read(b []byte) (int, error) {
	if r.n <= -1<<20 {
		return 0, io.EOF
	}
	// Reads stop at the n-th byte, so a store reading in large parts still
	// sees the cancellation before the end.
	limit := r.n
	if r.n <= 0 {
		r.cancel()
		limit += 1 << 20
	}
	k := min(len(b), limit)
	r.n -= k
	return k, nil
}

func TestFailedPutLeavesNothing(t *testing.T) {
	errBroken := errors.New("connection reset")
	tests := []struct {
		name    string
		reader  func(cancel context.CancelFunc) io.Reader
		precanc bool
		wantErr error
	}{
		{
			name:    "reader fails midway",
			reader:  func(context.CancelFunc) io.Reader { return &failingReader{n: 3 << 20, err: errBroken} },
			wantErr: errBroken,
		},
		{
			name:    "reader fails at once",
			reader:  func(context.CancelFunc) io.Reader { return &failingReader{err: errBroken} },
			wantErr: errBroken,
		},
		{
			name:    "context cancelled before",
			reader:  func(context.CancelFunc) io.Reader { return strings.NewReader("data") },
			precanc: true,
			wantErr: context.Canceled,
		},
		{
			name:    "context cancelled midway",
			reader:  func(cancel context.CancelFunc) io.Reader { return &cancellingReader{n: 1 << 20, cancel: cancel} },
			wantErr: context.Canceled,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, existing := range []bool{false, true} {
				s := newStore(t)
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
					t.Fatalf("existing=%v: Put error = %v; want %v", existing, err, tc.wantErr)
				}
				if n != 0 {
					t.Errorf("existing=%v: Put = %d bytes; want 0 on failure", existing, n)
				}
				var want []string
				if existing {
					want = []string{key}
					if got := string(read(t, s, key)); got != "old" {
						t.Errorf("existing=%v: after failed Put, Open = %q; want %q", existing, got, "old")
					}
				} else if _, err := s.Open(context.Background(), key); !errors.Is(err, ErrNotFound) {
					t.Errorf("existing=%v: after failed Put, Open error = %v; want ErrNotFound", existing, err)
				}
				if got := files(t, s); strings.Join(got, ",") != strings.Join(want, ",") {
					t.Errorf("existing=%v: files in store = %q; want %q", existing, got, want)
				}
			}
		})
	}
}

func TestMissingKeyIsNotFound(t *testing.T) {
	s := newStore(t)
	put(t, s, "jobs/x/audio.wav", []byte("a"))
	tests := []struct {
		name string
		key  string
	}{
		{name: "never written", key: "nothing/here"},
		{name: "sibling of an object", key: "jobs/x/other.wav"},
		{name: "below an object", key: "jobs/x/audio.wav/more"},
		// A directory exists there, but a key that is only a prefix of
		// other keys holds nothing.
		{name: "prefix directory", key: "jobs/x"},
		{name: "top directory", key: "jobs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rc, err := s.Open(context.Background(), tc.key)
			if err == nil {
				rc.Close()
			}
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("Open(%q) error = %v; want ErrNotFound", tc.key, err)
			}
			if _, err := s.Size(context.Background(), tc.key); !errors.Is(err, ErrNotFound) {
				t.Errorf("Size(%q) error = %v; want ErrNotFound", tc.key, err)
			}
		})
	}
}

func TestValidKey(t *testing.T) {
	tests := []struct {
		key  string
		want bool
	}{
		{"jobs/x/audio.wav", true},
		{"a", true},
		{"a/b.c/d", true},
		{"...", true},
		{".hidden", true},
		{"", false},
		{"/abs", false},
		{"/", false},
		{"a//b", false},
		{"a/", false},
		{"a/../b", false},
		{"..", false},
		{"../a", false},
		{"a/..", false},
		{".", false},
		{"./a", false},
		{"a/./b", false},
		{"a\\b", false},
		{"..\\..\\x", false},
		{"a\x00b", false},
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) {
			if got := ValidKey(tc.key); got != tc.want {
				t.Errorf("ValidKey(%q) = %v; want %v", tc.key, got, tc.want)
			}
		})
	}
}

func TestInvalidKeyRefusedByEveryMethod(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	for _, key := range []string{"", "/abs", "a//b", "a/../b", "..", ".", "a\\b", "a\x00b", "../outside"} {
		t.Run(key, func(t *testing.T) {
			if p, err := s.Path(key); err == nil {
				t.Errorf("Path(%q) = %q, nil; want an error", key, p)
			}
			if _, err := s.Put(ctx, key, strings.NewReader("x")); err == nil {
				t.Errorf("Put(%q) error = nil; want an error", key)
			}
			if rc, err := s.Open(ctx, key); err == nil {
				rc.Close()
				t.Errorf("Open(%q) error = nil; want an error", key)
			}
			if _, err := s.Size(ctx, key); err == nil {
				t.Errorf("Size(%q) error = nil; want an error", key)
			}
		})
	}
	if got := files(t, s); len(got) != 0 {
		t.Errorf("files after refused Puts = %q; want none", got)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(s.Root()), "outside")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stat of a file beside the root: %v; want it not to exist", err)
	}
}

func isHashSegment(s string) bool {
	h, ok := strings.CutPrefix(s, "h-")
	if !ok || len(h) != 32 {
		return false
	}
	for _, r := range h {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

func jobSegment(t *testing.T, key, name string) string {
	t.Helper()
	rest, ok := strings.CutPrefix(key, "jobs/")
	if !ok {
		t.Fatalf("key %q does not start with jobs/", key)
	}
	seg, ok := strings.CutSuffix(rest, "/"+name)
	if !ok {
		t.Fatalf("key %q does not end with /%s", key, name)
	}
	return seg
}

func TestJobKeyKeepsSafeIDs(t *testing.T) {
	for _, id := range []string{"tg-100-5", "cli-abc_1.2", "http-Key_1", "a", "...", strings.Repeat("x", 128)} {
		t.Run(id, func(t *testing.T) {
			if got, want := JobKey(id, "audio.wav"), "jobs/"+id+"/audio.wav"; got != want {
				t.Errorf("JobKey(%q) = %q; want %q", id, got, want)
			}
		})
	}
}

// hostileIDs are ids a sender controls that must not be used verbatim.
var hostileIDs = []struct{ name, id string }{
	{"parent escape", "../../etc"},
	{"dot dot", ".."},
	{"dot", "."},
	{"slash", "a/b"},
	{"absolute", "/etc/passwd"},
	{"backslash", `..\..\x`},
	{"empty", ""},
	{"space", "x y"},
	{"too long", strings.Repeat("a", 200)},
	{"just too long", strings.Repeat("a", 129)},
	{"non-ASCII", "задача"},
	{"NUL", "a\x00b"},
	{"newline", "a\nb"},
	{"percent", "a%2F..%2Fb"},
	// An id that looks like a hashed segment would otherwise share a
	// directory with the hostile id whose hash it copies.
	{"looks hashed", "h-00112233445566778899aabbccddeeff"},
}

func TestJobKeyHashesUnsafeIDs(t *testing.T) {
	seen := map[string]string{}
	for _, tc := range hostileIDs {
		t.Run(tc.name, func(t *testing.T) {
			key := JobKey(tc.id, "audio.wav")
			seg := jobSegment(t, key, "audio.wav")
			if !isHashSegment(seg) {
				t.Errorf("JobKey(%q) segment = %q; want h-<32 hex digits>", tc.id, seg)
			}
			if !ValidKey(key) {
				t.Errorf("ValidKey(JobKey(%q)) = false; want true", tc.id)
			}
			if again := JobKey(tc.id, "audio.wav"); again != key {
				t.Errorf("JobKey(%q) second call = %q; want the stable %q", tc.id, again, key)
			}
			if other, ok := seen[seg]; ok {
				t.Errorf("JobKey(%q) segment %q; want it distinct from that of %q", tc.id, seg, other)
			}
			seen[seg] = tc.id
		})
	}
}

func TestJobKeyNeverCollides(t *testing.T) {
	// The hashed form of one id fed back as an id must not land in the same
	// directory, or a sender could read or overwrite another job's objects.
	for _, tc := range hostileIDs {
		t.Run(tc.name, func(t *testing.T) {
			seg := jobSegment(t, JobKey(tc.id, "a"), "a")
			if got := jobSegment(t, JobKey(seg, "a"), "a"); got == seg {
				t.Errorf("JobKey(%q) segment = %q; want it to differ from JobKey(%q)'s", seg, got, tc.id)
			}
		})
	}
}

func TestJobKeyStaysUnderRoot(t *testing.T) {
	s := newStore(t)
	for _, tc := range hostileIDs {
		t.Run(tc.name, func(t *testing.T) {
			p, err := s.Path(JobKey(tc.id, "audio.wav"))
			if err != nil {
				t.Fatalf("Path(JobKey(%q)): %v", tc.id, err)
			}
			rel, err := filepath.Rel(s.Root(), p)
			if err != nil {
				t.Fatal(err)
			}
			if rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
				t.Errorf("Path(JobKey(%q)) = %q; want it under %q", tc.id, p, s.Root())
			}
			if want := filepath.Join(s.Root(), "jobs"); filepath.Dir(filepath.Dir(p)) != want {
				t.Errorf("Path(JobKey(%q)) = %q; want it two levels below %q", tc.id, p, want)
			}
		})
	}
}
