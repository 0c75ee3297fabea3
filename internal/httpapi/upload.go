package httpapi

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

// formSlack is what a multipart body may hold besides the recording: part
// headers and the small fields.
const formSlack = 1 << 20

// maxFieldBytes bounds one form field that is not the recording.
const maxFieldBytes = 16 << 10

// upload is a recording received into a spool file, and the fields that
// came with it.
type upload struct {
	path   string
	size   int64
	sha256 []byte
	// name is the sender's file name, made harmless; mime and ext what the
	// bytes look like.
	name, mime, ext string
	fields          map[string]string
	// lists are every value of each field by its name without a trailing
	// "[]" or "[n]": OpenAI's SDKs send arrays as timestamp_granularities[]
	// one part per value, other clients with indices or bare names.
	lists map[string][]string
}

// list returns every value of an array field.
func (u *upload) list(name string) []string { return u.lists[name] }

// listName is the name of an array field without its brackets.
func listName(name string) string {
	if i := strings.IndexByte(name, '['); i > 0 && strings.HasSuffix(name, "]") {
		return name[:i]
	}
	return name
}

func (u *upload) remove() {
	if u != nil && u.path != "" {
		_ = os.Remove(u.path)
	}
}

// field returns a form field, else the query parameter of that name.
func (u *upload) field(r *http.Request, name string) string {
	if v, ok := u.fields[name]; ok {
		return v
	}
	return r.URL.Query().Get(name)
}

// receive reads the recording of a request into a spool file: the "file"
// field of a multipart form, or else the raw body. The limit holds while
// the bytes arrive, so an oversized upload is refused without being stored;
// nothing but small buffers is held in memory.
func (a *API) receive(w http.ResponseWriter, r *http.Request, multipartOnly bool) (*upload, *apiError) {
	max := a.opts.MaxUploadBytes
	if r.Body == nil {
		r.Body = http.NoBody
	}
	mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "multipart/form-data" {
		if multipartOnly {
			return nil, errBadRequest("invalid_request", "send multipart/form-data with the recording in the field file")
		}
		if r.ContentLength > max {
			return nil, tooLarge(max)
		}
		declared := r.Header.Get("Content-Type")
		if mt == "application/x-www-form-urlencoded" {
			// What curl --data-binary claims for any file.
			declared = ""
		}
		name := r.URL.Query().Get("filename")
		if _, p, err := mime.ParseMediaType(r.Header.Get("Content-Disposition")); err == nil && p["filename"] != "" {
			name = p["filename"]
		}
		u, apiErr := a.spool(http.MaxBytesReader(w, r.Body, max+1), declared, name)
		if apiErr != nil {
			return nil, apiErr
		}
		u.fields, u.lists = map[string]string{}, map[string][]string{}
		return u, nil
	}
	if params["boundary"] == "" {
		return nil, errBadRequest("invalid_request", "the multipart body has no boundary")
	}
	if r.ContentLength > max+formSlack {
		return nil, tooLarge(max)
	}
	body := http.MaxBytesReader(w, r.Body, max+formSlack)
	mr := multipart.NewReader(body, params["boundary"])
	fields, lists := map[string]string{}, map[string][]string{}
	var u *upload
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			u.remove()
			return nil, readError(err, max, "the multipart body is malformed")
		}
		name := part.FormName()
		if name == "file" {
			if u != nil {
				u.remove()
				return nil, errBadRequest("invalid_request", "send one file per request")
			}
			var apiErr *apiError
			if u, apiErr = a.spool(part, part.Header.Get("Content-Type"), part.FileName()); apiErr != nil {
				return nil, apiErr
			}
			continue
		}
		v, err := io.ReadAll(io.LimitReader(part, maxFieldBytes+1))
		if err == nil && len(v) > maxFieldBytes {
			err = fmt.Errorf("field %s is longer than %d bytes", name, maxFieldBytes)
			u.remove()
			return nil, errBadRequest("invalid_request", err.Error())
		}
		if err != nil {
			u.remove()
			return nil, readError(err, max, "the multipart body is malformed")
		}
		if _, seen := fields[name]; !seen {
			fields[name] = string(v)
		}
		lists[listName(name)] = append(lists[listName(name)], string(v))
	}
	if u == nil {
		return nil, errBadRequest("missing_file", "the form has no field file with the recording")
	}
	u.fields, u.lists = fields, lists
	return u, nil
}

// spool copies src into a new file in the spool directory, hashing it on
// the way, after looking at its first bytes.
func (a *API) spool(src io.Reader, declared, name string) (*upload, *apiError) {
	max := a.opts.MaxUploadBytes
	br := bufio.NewReaderSize(src, 4096)
	head, err := br.Peek(512)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return nil, readError(err, max, "the upload was cut short")
	}
	if len(head) == 0 {
		return nil, errBadRequest("empty_audio", "the recording has no bytes; nothing was accepted")
	}
	kind, apiErr := sniff(head, declared)
	if apiErr != nil {
		return nil, apiErr
	}
	f, err := os.CreateTemp(a.opts.SpoolDir, "upload-*")
	if err != nil {
		return nil, &apiError{status: http.StatusInternalServerError, code: "storage_error", message: "the upload cannot be stored: " + err.Error()}
	}
	u := &upload{path: f.Name(), name: cleanName(name), mime: kind.mime}
	u.ext = kind.ext
	if u.ext == "" {
		u.ext = extOf(u.name)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(br, max+1))
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	switch {
	case err != nil:
		u.remove()
		return nil, readError(err, max, "the upload was cut short")
	case n > max:
		u.remove()
		return nil, tooLarge(max)
	}
	u.size, u.sha256 = n, h.Sum(nil)
	return u, nil
}

func tooLarge(max int64) *apiError {
	return &apiError{status: http.StatusRequestEntityTooLarge, code: "too_large",
		message: fmt.Sprintf("the recording is larger than %d bytes, the most this server accepts (TRANSCRIBER_MAX_UPLOAD_BYTES)", max)}
}

// readError tells an oversized body from a broken one.
func readError(err error, max int64, msg string) *apiError {
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return tooLarge(max)
	}
	return errBadRequest("invalid_request", msg+": "+err.Error())
}

// mediaKind is what the first bytes of an upload say it is.
type mediaKind struct{ mime, ext string }

// sniff accepts bytes that look like a container of sound or video, and
// unknown binary that does not claim to be something else; ffprobe has the
// final word on those in the job. Text, images, documents and archives are
// refused here, before anything is stored.
func sniff(head []byte, declared string) (mediaKind, *apiError) {
	if k, ok := container(head); ok {
		return k, nil
	}
	detected := http.DetectContentType(head)
	if isMedia(detected) {
		return mediaKind{mime: detected}, nil
	}
	if detected != "application/octet-stream" {
		mt, _, _ := mime.ParseMediaType(detected)
		return mediaKind{}, unsupported(fmt.Sprintf("the file is %s, not audio or video", mt))
	}
	mt, _, _ := mime.ParseMediaType(declared)
	switch {
	case mt == "" || mt == "application/octet-stream" || mt == "binary/octet-stream":
		return mediaKind{mime: "application/octet-stream"}, nil
	case isMedia(mt):
		return mediaKind{mime: mt}, nil
	}
	return mediaKind{}, unsupported(fmt.Sprintf("the file is declared as %s, not audio or video", mt))
}

func unsupported(msg string) *apiError {
	return &apiError{status: http.StatusUnsupportedMediaType, code: "unsupported_format",
		message: msg + "; send a recording (ogg, opus, mp3, m4a, wav, flac, webm, mp4, ...)"}
}

func isMedia(mt string) bool {
	return strings.HasPrefix(mt, "audio/") || strings.HasPrefix(mt, "video/") || mt == "application/ogg"
}

// container recognises the formats people send recordings in by their
// signatures, including those http.DetectContentType does not know.
func container(b []byte) (mediaKind, bool) {
	at := func(off int, sig string) bool { return len(b) >= off+len(sig) && string(b[off:off+len(sig)]) == sig }
	switch {
	case at(0, "OggS"):
		return mediaKind{"audio/ogg", ".ogg"}, true
	case at(0, "RIFF") && at(8, "WAVE"):
		return mediaKind{"audio/wav", ".wav"}, true
	case at(0, "RIFF") && at(8, "AVI "):
		return mediaKind{"video/x-msvideo", ".avi"}, true
	case at(0, "fLaC"):
		return mediaKind{"audio/flac", ".flac"}, true
	case at(0, "ID3"):
		return mediaKind{"audio/mpeg", ".mp3"}, true
	case at(4, "ftyp"):
		switch {
		case at(8, "M4A ") || at(8, "M4B "):
			return mediaKind{"audio/mp4", ".m4a"}, true
		case at(8, "qt  "):
			return mediaKind{"video/quicktime", ".mov"}, true
		case at(8, "3g"):
			return mediaKind{"video/3gpp", ".3gp"}, true
		}
		return mediaKind{"video/mp4", ".mp4"}, true
	case at(0, "\x1a\x45\xdf\xa3"):
		if strings.Contains(string(b[:min(len(b), 64)]), "webm") {
			return mediaKind{"video/webm", ".webm"}, true
		}
		return mediaKind{"video/x-matroska", ".mkv"}, true
	case at(0, "#!AMR"):
		return mediaKind{"audio/amr", ".amr"}, true
	case at(0, "FORM") && (at(8, "AIFF") || at(8, "AIFC")):
		return mediaKind{"audio/aiff", ".aiff"}, true
	case at(0, "\x30\x26\xb2\x75\x8e\x66\xcf\x11"):
		return mediaKind{"audio/x-ms-asf", ".wma"}, true
	case at(0, "caff"):
		return mediaKind{"audio/x-caf", ".caf"}, true
	case at(0, "wvpk"):
		return mediaKind{"audio/x-wavpack", ".wv"}, true
	case at(0, ".snd"):
		return mediaKind{"audio/basic", ".au"}, true
	case len(b) > 188 && b[0] == 0x47 && b[188] == 0x47:
		return mediaKind{"video/mp2t", ".ts"}, true
	case len(b) >= 2 && b[0] == 0xff && b[1]&0xe0 == 0xe0 && b[1]&0x18 != 0x08:
		// An MPEG audio frame: layer bits 00 are AAC's ADTS header.
		if b[1]&0x06 == 0 {
			return mediaKind{"audio/aac", ".aac"}, true
		}
		return mediaKind{"audio/mpeg", ".mp3"}, true
	}
	return mediaKind{}, false
}

// cleanName keeps a file name for people to read: its last path element,
// without control characters, at most 255 bytes. It is never used as a
// path.
func cleanName(s string) string {
	s = strings.ToValidUTF8(s, "")
	s = path.Base(strings.ReplaceAll(s, "\\", "/"))
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == unicode.ReplacementChar || unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if s == "." || s == ".." || s == "/" {
		return ""
	}
	for len(s) > 255 {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}

// extOf keeps a short alphanumeric extension of a name, which helps people
// reading the store; anything else becomes .bin.
func extOf(name string) string {
	ext := strings.ToLower(path.Ext(name))
	if len(ext) < 2 || len(ext) > 9 {
		return ".bin"
	}
	for _, r := range ext[1:] {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return ".bin"
		}
	}
	return ext
}
