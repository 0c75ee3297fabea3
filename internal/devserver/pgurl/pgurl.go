// Package pgurl reads the PostgreSQL URL that points the embedded Temporal
// server at its databases. It depends on nothing but the standard library,
// so that the configuration can check the URL without linking the server.
package pgurl

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// VisibilitySuffix names the visibility database after the main one, as
// Temporal's own tooling and the compose file do: temporal and
// temporal_visibility.
const VisibilitySuffix = "_visibility"

// params are the connection parameters a URL may carry, passed to the
// driver as they are. Anything else is refused, so that a typo such as
// sslmod=disable fails at start instead of silently connecting in the clear.
var params = []string{"sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout", "application_name"}

var sslModes = []string{"disable", "require", "verify-ca", "verify-full"}

// The Temporal server builds its own connection string and does not escape
// the user or the database name, so both are held to characters that need
// no escaping.
var (
	userRe     = regexp.MustCompile(`^[A-Za-z0-9_.~-]+$`)
	databaseRe = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

// URL is a PostgreSQL server, the credentials to log in with, and the
// database that holds Temporal's state; visibility lives beside it in
// Database + VisibilitySuffix.
type URL struct {
	// Addr is host:port.
	Addr     string
	User     string
	Password string
	Database string
	// Params are connection parameters such as sslmode.
	Params map[string]string
}

// Parse reads postgres://user:password@host:port/database?sslmode=disable
// (postgresql:// is the same). The port defaults to 5432. Errors never
// contain the password.
func Parse(s string) (URL, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		// url.Error repeats the whole URL, password included.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return URL{}, fmt.Errorf("not a URL (%v); write postgres://user:password@host:5432/temporal?sslmode=disable", err)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return URL{}, fmt.Errorf("scheme %q is not postgres; write postgres://user:password@host:5432/temporal?sslmode=disable", u.Scheme)
	}
	out := URL{Params: map[string]string{}}
	if u.User != nil {
		out.User = u.User.Username()
		out.Password, _ = u.User.Password()
	}
	redacted := out.redactedFrom(u)
	switch {
	case u.Opaque != "":
		return URL{}, fmt.Errorf("%s: write postgres://user:password@host:5432/temporal, with the two slashes", redacted)
	case u.Hostname() == "":
		return URL{}, fmt.Errorf("%s: no host; write postgres://user:password@host:5432/temporal", redacted)
	case out.User == "":
		return URL{}, fmt.Errorf("%s: no user; write postgres://user:password@host:5432/temporal", redacted)
	case !userRe.MatchString(out.User):
		return URL{}, fmt.Errorf("%s: the user name may hold only letters, digits and _ . ~ - (the Temporal server passes it on unescaped)", redacted)
	case strings.ContainsAny(out.Password, " \t\r\n"):
		// The server escapes the password as a query value, which turns a
		// space into a plus sign that PostgreSQL then compares literally.
		return URL{}, fmt.Errorf("%s: the password holds white space, which the Temporal server cannot pass on; choose another", redacted)
	case u.Fragment != "":
		return URL{}, fmt.Errorf("%s: unexpected #fragment", redacted)
	}
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	out.Addr = net.JoinHostPort(u.Hostname(), port)
	out.Database = strings.TrimPrefix(u.Path, "/")
	switch {
	case out.Database == "":
		return URL{}, fmt.Errorf("%s: no database; name it in the path, e.g. postgres://user:password@host:5432/temporal", redacted)
	case !databaseRe.MatchString(out.Database):
		return URL{}, fmt.Errorf("%s: the database name may hold only letters, digits, _ and -", redacted)
	case len(out.Database+VisibilitySuffix) > 63:
		// PostgreSQL cuts names at 63 bytes, which would make the two
		// databases' names collide or differ from what was asked for.
		return URL{}, fmt.Errorf("%s: the database name is too long; PostgreSQL allows 63 bytes and %s is added for visibility", redacted, VisibilitySuffix)
	}
	for name, vs := range u.Query() {
		if !slices.Contains(params, name) {
			return URL{}, fmt.Errorf("%s: unknown parameter %q; known are %s", redacted, name, strings.Join(params, ", "))
		}
		if len(vs) != 1 {
			return URL{}, fmt.Errorf("%s: parameter %s given %d times", redacted, name, len(vs))
		}
		out.Params[name] = vs[0]
	}
	if m, ok := out.Params["sslmode"]; ok && !slices.Contains(sslModes, m) {
		return URL{}, fmt.Errorf("%s: sslmode %q is not one of %s", redacted, m, strings.Join(sslModes, ", "))
	}
	return out, nil
}

// VisibilityDatabase is the database of Temporal's visibility store.
func (u URL) VisibilityDatabase() string { return u.Database + VisibilitySuffix }

// SSLMode is the sslmode the connection uses; the Temporal server's
// default, like this one, is disable.
func (u URL) SSLMode() string {
	if m := u.Params["sslmode"]; m != "" {
		return m
	}
	return "disable"
}

// ConnString is a lib/pq connection URL for database with the password in
// it. It is for opening connections only: never log it.
func (u URL) ConnString(database string) string {
	q := url.Values{}
	for k, v := range u.Params {
		q.Set(k, v)
	}
	q.Set("sslmode", u.SSLMode())
	return (&url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(u.User, u.Password),
		Host:     u.Addr,
		Path:     "/" + database,
		RawQuery: q.Encode(),
	}).String()
}

// String is the URL without its password, fit for logs and errors.
func (u URL) String() string {
	q := url.Values{}
	for k, v := range u.Params {
		q.Set(k, v)
	}
	return (&url.URL{Scheme: "postgres", User: url.User(u.User), Host: u.Addr, Path: "/" + u.Database, RawQuery: q.Encode()}).String()
}

// redactedFrom describes a URL still being checked, without its password.
func (u URL) redactedFrom(parsed *url.URL) string {
	c := *parsed
	if u.User != "" {
		c.User = url.User(u.User)
	} else {
		c.User = nil
	}
	return c.String()
}
