package pgurl

import (
	"maps"
	"net/url"
	"strings"
	"testing"
)

const secret = "s3cr%t:p@ss"

// Scenario: A PostgreSQL URL is read with its defaults, and a wrong one is refused without showing the password
func TestParse(t *testing.T) {
	pw := url.QueryEscape(secret)
	u, err := Parse("postgres://temporal:" + pw + "@db.example:6543/jobs?sslmode=verify-full&sslrootcert=/etc/ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	want := URL{Addr: "db.example:6543", User: "temporal", Password: secret, Database: "jobs",
		Params: map[string]string{"sslmode": "verify-full", "sslrootcert": "/etc/ca.pem"}}
	if u.Addr != want.Addr || u.User != want.User || u.Password != want.Password || u.Database != want.Database || !maps.Equal(u.Params, want.Params) {
		t.Errorf("Parse = %+v; want %+v", u, want)
	}
	if got := u.VisibilityDatabase(); got != "jobs_visibility" {
		t.Errorf("visibility database = %q; want jobs_visibility", got)
	}
	if s := u.String(); strings.Contains(s, "s3cr") || !strings.Contains(s, "temporal@db.example:6543/jobs") {
		t.Errorf("String() = %q; want the URL without the password", s)
	}
	// The connection string carries the password, escaped so that the
	// driver reads it back exactly.
	cs, err := url.Parse(u.ConnString("jobs_visibility"))
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := cs.User.Password(); p != secret || cs.Path != "/jobs_visibility" || cs.Query().Get("sslmode") != "verify-full" {
		t.Errorf("ConnString = password %q, path %q, query %q", p, cs.Path, cs.RawQuery)
	}

	d, err := Parse("postgresql://me@localhost/temporal")
	if err != nil {
		t.Fatal(err)
	}
	if d.Addr != "localhost:5432" || d.SSLMode() != "disable" || d.Password != "" {
		t.Errorf("defaults: %+v, sslmode %s; want port 5432 and sslmode disable", d, d.SSLMode())
	}
	if ip6, err := Parse("postgres://me:x@[::1]:5433/t"); err != nil || ip6.Addr != "[::1]:5433" {
		t.Errorf("IPv6 host: %+v, %v", ip6, err)
	}

	for _, tc := range []struct{ name, in, want string }{
		{"not a URL", "postgres://me:" + pw + "@host:port/x", "not a URL"},
		{"other scheme", "mysql://me:" + pw + "@host/x", `scheme "mysql"`},
		{"no slashes", "postgres:me", "two slashes"},
		{"no host", "postgres://me:" + pw + "@/x", "no host"},
		{"no user", "postgres://host/x", "no user"},
		{"user needing escapes", "postgres://a%40b:" + pw + "@host/x", "user name"},
		{"space in password", "postgres://me:a%20b@host/x", "white space"},
		{"no database", "postgres://me:" + pw + "@host", "no database"},
		{"odd database", "postgres://me:" + pw + "@host/a.b", "database name"},
		{"long database", "postgres://me:" + pw + "@host/" + strings.Repeat("d", 53), "too long"},
		{"unknown parameter", "postgres://me:" + pw + "@host/x?sslmod=disable", `unknown parameter "sslmod"`},
		{"repeated parameter", "postgres://me:" + pw + "@host/x?sslmode=disable&sslmode=require", "2 times"},
		{"bad sslmode", "postgres://me:" + pw + "@host/x?sslmode=prefer", `sslmode "prefer"`},
		{"fragment", "postgres://me:" + pw + "@host/x#y", "fragment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse(%q) = %v; want an error with %q", tc.in, err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cr") || strings.Contains(err.Error(), pw) {
				t.Errorf("error shows the password: %v", err)
			}
		})
	}
}
