package devserver

import (
	"context"
	"testing"

	"go.temporal.io/server/common/authorization"
)

func TestAPIKeysAdmitOnlyTheirBearers(t *testing.T) {
	keys := apiKeys{"first", "second"}
	for _, tc := range []struct {
		token string
		allow bool
	}{
		{"Bearer first", true},
		{"Bearer second", true},
		{"Bearer third", false},
		{"first", false},
		{"Bearer first ", false},
		{"", false},
	} {
		claims, err := keys.GetClaims(&authorization.AuthInfo{AuthToken: tc.token})
		if err != nil {
			t.Fatalf("GetClaims(%q): %v", tc.token, err)
		}
		res, err := keys.Authorize(context.Background(), claims, &authorization.CallTarget{APIName: "/temporal.api.workflowservice.v1.WorkflowService/ListWorkflowExecutions"})
		if err != nil {
			t.Fatalf("Authorize(%q): %v", tc.token, err)
		}
		if got := res.Decision == authorization.DecisionAllow; got != tc.allow {
			t.Errorf("token %q allowed = %v; want %v", tc.token, got, tc.allow)
		}
	}
}
