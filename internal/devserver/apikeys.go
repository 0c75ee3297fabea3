package devserver

import (
	"context"
	"crypto/subtle"

	"go.temporal.io/server/common/authorization"
)

// apiKeys admits the callers that present one of its keys as a bearer
// token, the way Temporal Cloud checks API keys, and nobody else. It is
// both the claim mapper (which sees the token) and the authorizer (which
// decides); the server's own services use the internal frontend, which has
// a claim mapper of its own.
type apiKeys []string

var (
	_ authorization.ClaimMapper                     = apiKeys(nil)
	_ authorization.ClaimMapperWithAuthInfoRequired = apiKeys(nil)
	_ authorization.Authorizer                      = apiKeys(nil)
)

func (k apiKeys) GetClaims(info *authorization.AuthInfo) (*authorization.Claims, error) {
	for _, key := range k {
		// Constant time: how much of a key matched must not show in how
		// long the answer takes.
		if subtle.ConstantTimeCompare([]byte(info.AuthToken), []byte("Bearer "+key)) == 1 {
			return &authorization.Claims{Subject: "api-key", System: authorization.RoleAdmin}, nil
		}
	}
	// No claims, not an error: the authorizer turns the caller away with
	// the server's usual answer.
	return &authorization.Claims{}, nil
}

// AuthInfoRequired is false so that calls without any token reach
// GetClaims too, and are refused.
func (apiKeys) AuthInfoRequired() bool { return false }

func (apiKeys) Authorize(_ context.Context, claims *authorization.Claims, _ *authorization.CallTarget) (authorization.Result, error) {
	if claims != nil && claims.System&authorization.RoleAdmin != 0 {
		return authorization.Result{Decision: authorization.DecisionAllow}, nil
	}
	return authorization.Result{Decision: authorization.DecisionDeny, Reason: "a valid API key is required"}, nil
}
