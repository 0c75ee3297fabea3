package httpapi

import (
	_ "embed"
	"net/http"
)

// openAPIDocument describes every route of the server; a test keeps it in
// step with the router.
//
//go:embed openapi.json
var openAPIDocument []byte

func (a *API) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIDocument)
}
