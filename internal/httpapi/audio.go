package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// getAudio streams a job's original recording, with Range support so that
// the page's player can seek.
func (a *API) getAudio(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	st, _, apiErr := a.ownJob(r.Context(), id)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	if !st.RemovedAt.IsZero() {
		writeError(w, &apiError{status: http.StatusGone, code: "removed",
			message: fmt.Sprintf("the recordings of job %s were removed at %s, after the retention period", id, st.RemovedAt.Format(time.RFC3339))})
		return
	}
	if st.Original.Key == "" {
		// A Telegram job stores its recording only once it fetched it.
		writeError(w, &apiError{status: http.StatusConflict, code: "not_ready", message: fmt.Sprintf("job %s has not fetched its recording yet", id)})
		return
	}
	rc, err := a.opts.Blobs.Open(r.Context(), st.Original.Key)
	if err != nil {
		writeError(w, &apiError{status: http.StatusInternalServerError, code: "storage_error",
			message: fmt.Sprintf("the recording of job %s cannot be read from this server's store", id)})
		a.log.Error("recording unreadable", "job_id", id, "error", err)
		return
	}
	defer func() { _ = rc.Close() }() // only read
	content, ok := rc.(io.ReadSeeker)
	if !ok {
		// An object store's reader cannot seek: a copy on disk can, and
		// keeps memory flat whatever the recording's size.
		f, err := a.spoolCopy(rc)
		if err != nil {
			writeError(w, &apiError{status: http.StatusInternalServerError, code: "storage_error",
				message: fmt.Sprintf("the recording of job %s cannot be read from this server's store", id)})
			a.log.Error("recording unreadable", "job_id", id, "error", err)
			return
		}
		defer func() { _ = f.Close(); _ = os.Remove(f.Name()) }()
		content = f
	}
	if st.Original.MIME != "" {
		w.Header().Set("Content-Type", st.Original.MIME)
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// A browser shared by two accounts must not hand one the other's
	// recording from its cache.
	w.Header().Set("Cache-Control", "no-store")
	http.ServeContent(w, r, "", st.AcceptedAt, content)
}

func (a *API) spoolCopy(r io.Reader) (*os.File, error) {
	f, err := os.CreateTemp(a.opts.SpoolDir, "audio-*")
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}
