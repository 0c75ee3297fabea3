package transcript

import (
	"context"
	"errors"
	"io"
	"mime"
	"strings"
	"testing"
)

// Every format Render writes has its media type, and nothing else has one.
func TestMediaType(t *testing.T) {
	for _, f := range Formats {
		mt, ok := MediaType(f)
		if !ok {
			t.Errorf("format %s has no media type", f)
			continue
		}
		if _, _, err := mime.ParseMediaType(mt); err != nil {
			t.Errorf("MediaType(%s) = %q: %v", f, mt, err)
		}
	}
	if len(mediaTypes) != len(Formats) {
		t.Errorf("%d media types for %d formats", len(mediaTypes), len(Formats))
	}
	if _, ok := MediaType("docx"); ok {
		t.Error("docx has a media type; want none")
	}
}

type memStore map[string]string

func (m memStore) Open(_ context.Context, key string) (io.ReadCloser, error) {
	s, ok := m[key]
	if !ok {
		return nil, errors.New("not found")
	}
	return io.NopCloser(strings.NewReader(s)), nil
}

func TestLoad(t *testing.T) {
	store := memStore{"good": `{"engine":"local","text":"go forward"}`, "bad": `{"text":`}
	ctx := context.Background()
	if d, err := Load(ctx, store, "good"); err != nil || d.Text != "go forward" || d.Engine != "local" {
		t.Errorf("Load(good) = %+v, %v", d, err)
	}
	if _, err := Load(ctx, store, "bad"); err == nil || !strings.Contains(err.Error(), "transcript bad") {
		t.Errorf("Load(bad) error = %v; want one naming the key", err)
	}
	if _, err := Load(ctx, store, "gone"); err == nil {
		t.Error("Load(gone) succeeded")
	}
}
