package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"
)

// Account is who a request speaks for: the owner of the jobs it sends,
// and the only one, with the admins, who sees them.
type Account struct {
	Name string
	// Admin accounts see, revive and cancel every job.
	Admin bool
}

type accountEntry struct {
	digest  [32]byte
	account Account
}

// accounts holds the configured tokens as digests only, each with the
// account it signs in.
type accounts []accountEntry

// parseAccounts reads TRANSCRIBER_API_TOKENS entries: "name:token", or a
// bare token, whose account is named after the token's fingerprint so that
// its jobs have an owner that does not reveal the token. admins names the
// accounts that see every job.
func parseAccounts(tokens, admins []string) (accounts, error) {
	isAdmin := make(map[string]bool, len(admins))
	for _, n := range admins {
		if n = strings.TrimSpace(n); n != "" {
			isAdmin[n] = true
		}
	}
	var out accounts
	seen := map[string]bool{}
	for _, t := range tokens {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		name, token, named := strings.Cut(t, ":")
		if !named {
			name, token = Fingerprint(t), t
		}
		if token == "" {
			return nil, fmt.Errorf("account %q has no token: write name:token", name)
		}
		if err := checkAccountName(name); err != nil {
			return nil, err
		}
		d := sha256.Sum256([]byte(token))
		for _, e := range out {
			if subtle.ConstantTimeCompare(e.digest[:], d[:]) == 1 {
				return nil, fmt.Errorf("accounts %q and %q have the same token; give each account its own", e.account.Name, name)
			}
		}
		seen[name] = true
		out = append(out, accountEntry{digest: d, account: Account{Name: name, Admin: isAdmin[name]}})
	}
	for n := range isAdmin {
		if !seen[n] {
			return nil, fmt.Errorf("TRANSCRIBER_ADMINS names %q, which is not an account of TRANSCRIBER_API_TOKENS", n)
		}
	}
	return out, nil
}

// Fingerprint names the account of a bare token: the start of the token's
// SHA-256, which identifies it without revealing it.
func Fingerprint(token string) string {
	d := sha256.Sum256([]byte(token))
	return "token-" + hex.EncodeToString(d[:4])
}

// checkAccountName keeps account names apart from the owners that intakes
// give (telegram:ID, vault:DEVICE, cli), and safe in a visibility query.
func checkAccountName(name string) error {
	if name == "" {
		return fmt.Errorf("an account of TRANSCRIBER_API_TOKENS has an empty name: write name:token")
	}
	if name == "cli" {
		return fmt.Errorf("account name %q is the owner of command-line jobs; choose another", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.@", r)) {
			return fmt.Errorf("account name %q may hold only letters, digits and - _ . @", name)
		}
	}
	return nil
}

// find returns the account whose token this is. It compares digests, so
// that neither the tokens' contents nor their lengths show in the time
// taken, and always looks at every token.
func (as accounts) find(token string) (Account, bool) {
	if token == "" {
		return Account{}, false
	}
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i, e := range as {
		if subtle.ConstantTimeCompare(sum[:], e.digest[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Account{}, false
	}
	return as[found].account, true
}

type accountKey struct{}

func withAccount(ctx context.Context, acc Account) context.Context {
	return context.WithValue(ctx, accountKey{}, acc)
}

// accountOf is the account a guarded request was signed in with.
func accountOf(ctx context.Context) Account {
	acc, _ := ctx.Value(accountKey{}).(Account)
	return acc
}
