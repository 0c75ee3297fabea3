package jobctl

import (
	"testing"

	"github.com/transcriber/transcriber/internal/job"
	"github.com/transcriber/transcriber/workflows"
)

// Scenario: A job's owner is on its status and set when it starts, not by the workflow
func TestStartOptionsCarryTheOwner(t *testing.T) {
	o := startOptions(StartRequest{ID: "cli-1", Input: workflows.Input{Source: job.SourceCLI, Engine: "local", Owner: job.OwnerCLI}})
	if got, ok := o.TypedSearchAttributes.GetKeyword(workflows.OwnerKey); !ok || got != "cli" {
		t.Errorf("TranscriptionOwner = %q, %v; want cli", got, ok)
	}
	if got, _ := o.TypedSearchAttributes.GetKeyword(workflows.StateKey); got != string(job.Accepted) {
		t.Errorf("TranscriptionState = %q; want accepted", got)
	}
	// A job without an owner gets no attribute rather than an empty one,
	// so that it is listed as the ownerless jobs older than owners are.
	o = startOptions(StartRequest{ID: "cli-2", Input: workflows.Input{Source: job.SourceCLI, Engine: "local"}})
	if got, ok := o.TypedSearchAttributes.GetKeyword(workflows.OwnerKey); ok {
		t.Errorf("TranscriptionOwner = %q; want none", got)
	}
}

func TestOwnerClauseQuotes(t *testing.T) {
	for _, tc := range []struct{ owner, want string }{
		{"alice", ` AND TranscriptionOwner = 'alice'`},
		{"vault:phone-1", ` AND TranscriptionOwner = 'vault:phone-1'`},
		{`x' OR 'a'='a`, ` AND TranscriptionOwner = 'x\' OR \'a\'=\'a'`},
		{`back\`, ` AND TranscriptionOwner = 'back\\'`},
	} {
		if got := ownerClause(tc.owner); got != tc.want {
			t.Errorf("ownerClause(%q) = %s; want %s", tc.owner, got, tc.want)
		}
	}
}
