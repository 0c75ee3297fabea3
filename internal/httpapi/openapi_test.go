package httpapi

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transcriber/transcriber/internal/engine"
	"github.com/transcriber/transcriber/internal/engine/assemblyai"
)

// Scenario: The OpenAPI document lists exactly the routes served
func TestOpenAPIDocumentMatchesRouter(t *testing.T) {
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Errorf("openapi = %q; want 3.x", doc.OpenAPI)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			if method != "parameters" {
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	// Engines' callbacks are mounted by EngineCallbacks, beside the API.
	served := []string{"GET /healthz", "GET /readyz", "GET /metrics", "POST /v1/callbacks/{engine}"}
	for _, rt := range apiRoutes {
		served = append(served, rt.method+" "+rt.path)
	}
	slices.Sort(documented)
	slices.Sort(served)
	if !slices.Equal(documented, served) {
		t.Errorf("documented operations:\n%s\nserved:\n%s", strings.Join(documented, "\n"), strings.Join(served, "\n"))
	}
	// Every route is really served: none answers 404 or 405.
	h := newHarness(t)
	h.h = NewHandler(Options{Gatherer: prometheus.NewRegistry(), API: h.api, Callbacks: &EngineCallbacks{
		Engines: map[string]engine.CallbackReceiver{assemblyai.Name: assemblyai.NewCallbacks("secret")},
	}})
	for _, op := range served {
		method, path, _ := strings.Cut(op, " ")
		path = strings.NewReplacer("{id}", "x", "{engine}", assemblyai.Name).Replace(path)
		r := authed(newRequest(method, path))
		if w := h.do(t, r); w.Code == http.StatusNotFound && !strings.Contains(w.Body.String(), "no job") && !strings.Contains(w.Body.String(), "model_not_found") || w.Code == http.StatusMethodNotAllowed {
			t.Errorf("%s answers %d %s", op, w.Code, w.Body)
		}
	}
	w := h.do(t, newRequest(http.MethodGet, "/v1/openapi.json"))
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" || w.Body.Len() != len(openAPIDocument) {
		t.Errorf("GET /v1/openapi.json = %d %q, %d bytes", w.Code, w.Header().Get("Content-Type"), w.Body.Len())
	}
}

func newRequest(method, path string) *http.Request {
	r, _ := http.NewRequest(method, "http://server"+path, nil)
	return r
}

// Scenario: The OpenAPI document describes every field of a job's failure
func TestOpenAPIFailureSchemaMatchesView(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	var documented, served []string
	for name := range doc.Components.Schemas["Failure"].Properties {
		documented = append(documented, name)
	}
	ft := reflect.TypeFor[failureView]()
	for i := range ft.NumField() {
		name, _, _ := strings.Cut(ft.Field(i).Tag.Get("json"), ",")
		served = append(served, name)
	}
	slices.Sort(documented)
	slices.Sort(served)
	if !slices.Equal(documented, served) {
		t.Errorf("Failure schema properties = %v; the view has %v", documented, served)
	}
}
