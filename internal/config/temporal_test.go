package config

import (
	"crypto/x509"
	"flag"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/transcriber/transcriber/internal/testcerts"
)

func TestTemporalTLSIsOnWhenAnythingAsksForIt(t *testing.T) {
	ca := testcerts.NewCA(t, "test ca")
	client1 := ca.Client(t, "worker")
	dir := t.TempDir()
	certPath, keyPath := client1.Write(t, dir, "client")
	caPath := ca.Write(t, dir, "ca")
	tests := []struct {
		name    string
		env     []string
		tls     bool
		certs   int
		roots   bool
		apiKey  bool
		skipVer bool
	}{
		{"nothing set", nil, false, 0, false, false, false},
		{"TEMPORAL_TLS=true", []string{"TEMPORAL_TLS", "true"}, true, 0, false, false, false},
		{"TEMPORAL_TLS=1", []string{"TEMPORAL_TLS", "1"}, true, 0, false, false, false},
		{"API key alone", []string{"TEMPORAL_API_KEY", "k"}, true, 0, false, true, false},
		{"API key without TLS", []string{"TEMPORAL_API_KEY", "k", "TEMPORAL_TLS", "false"}, false, 0, false, true, false},
		{"CA file", []string{"TEMPORAL_TLS_SERVER_CA_CERT_PATH", caPath}, true, 0, true, false, false},
		{"CA data", []string{"TEMPORAL_TLS_SERVER_CA_CERT_DATA", string(ca.PEM)}, true, 0, true, false, false},
		{"client files", []string{"TEMPORAL_TLS_CLIENT_CERT_PATH", certPath, "TEMPORAL_TLS_CLIENT_KEY_PATH", keyPath}, true, 1, false, false, false},
		{"client data", []string{"TEMPORAL_TLS_CLIENT_CERT_DATA", string(client1.CertPEM), "TEMPORAL_TLS_CLIENT_KEY_DATA", string(client1.KeyPEM)}, true, 1, false, false, false},
		{"cert file, key data", []string{"TEMPORAL_TLS_CLIENT_CERT_PATH", certPath, "TEMPORAL_TLS_CLIENT_KEY_DATA", string(client1.KeyPEM)}, true, 1, false, false, false},
		{"host verification off", []string{"TEMPORAL_TLS_DISABLE_HOST_VERIFICATION", "true"}, true, 0, false, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(env(tc.env...))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			var opts client.Options
			if err := c.TemporalSecurity.Apply(&opts); err != nil {
				t.Fatal(err)
			}
			conf := opts.ConnectionOptions.TLS
			if got := conf != nil; got != tc.tls {
				t.Fatalf("TLS on = %v; want %v", got, tc.tls)
			}
			if opts.ConnectionOptions.TLSDisabled == tc.tls {
				t.Errorf("TLSDisabled = %v with TLS %v; the SDK would decide otherwise", opts.ConnectionOptions.TLSDisabled, tc.tls)
			}
			if got := opts.Credentials != nil; got != tc.apiKey {
				t.Errorf("credentials set = %v; want %v", got, tc.apiKey)
			}
			if conf == nil {
				return
			}
			if len(conf.Certificates) != tc.certs {
				t.Errorf("client certificates = %d; want %d", len(conf.Certificates), tc.certs)
			}
			if got := conf.RootCAs != nil; got != tc.roots {
				t.Errorf("own CA pool = %v; want %v", got, tc.roots)
			}
			if tc.roots {
				if _, err := ca.Cert.Verify(x509.VerifyOptions{Roots: conf.RootCAs}); err != nil {
					t.Errorf("the pool does not hold the CA: %v", err)
				}
			}
			if conf.InsecureSkipVerify != tc.skipVer {
				t.Errorf("InsecureSkipVerify = %v; want %v", conf.InsecureSkipVerify, tc.skipVer)
			}
		})
	}
}

func TestTemporalServerNameOverridesTheHost(t *testing.T) {
	c, err := Load(env("TEMPORAL_TLS_SERVER_NAME", "frontend.example"))
	if err != nil {
		t.Fatal(err)
	}
	conf, err := c.TemporalSecurity.ClientTLS()
	if err != nil || conf == nil || conf.ServerName != "frontend.example" {
		t.Fatalf("ClientTLS = %+v, %v; want TLS with server name frontend.example", conf, err)
	}
}

// Scenario: Mistakes in the secured-cluster settings are explained before connecting
func TestTemporalSecurityMistakesAreExplained(t *testing.T) {
	ca := testcerts.NewCA(t, "test ca")
	pair := ca.Client(t, "worker")
	other := ca.Client(t, "other")
	dir := t.TempDir()
	certPath, keyPath := pair.Write(t, dir, "client")
	const secret = "sk-very-secret-key-material"
	tests := []struct {
		name string
		env  []string
		want []string
	}{
		{"cert without key", []string{"TEMPORAL_TLS_CLIENT_CERT_PATH", certPath},
			[]string{"needs its private key", "TEMPORAL_TLS_CLIENT_KEY_PATH"}},
		{"key without cert", []string{"TEMPORAL_TLS_CLIENT_KEY_DATA", string(pair.KeyPEM)},
			[]string{"needs its certificate", "TEMPORAL_TLS_CLIENT_CERT_PATH"}},
		{"path and data", []string{"TEMPORAL_TLS_CLIENT_CERT_PATH", certPath, "TEMPORAL_TLS_CLIENT_CERT_DATA", string(pair.CertPEM),
			"TEMPORAL_TLS_CLIENT_KEY_PATH", keyPath}, []string{"set TEMPORAL_TLS_CLIENT_CERT_PATH or TEMPORAL_TLS_CLIENT_CERT_DATA, not both"}},
		{"CA path and data", []string{"TEMPORAL_TLS_SERVER_CA_CERT_PATH", "/x", "TEMPORAL_TLS_SERVER_CA_CERT_DATA", string(ca.PEM)},
			[]string{"TEMPORAL_TLS_SERVER_CA_CERT_PATH or TEMPORAL_TLS_SERVER_CA_CERT_DATA, not both"}},
		{"unreadable CA", []string{"TEMPORAL_TLS_SERVER_CA_CERT_PATH", filepath.Join(dir, "missing.crt")},
			[]string{"TEMPORAL_TLS_SERVER_CA_CERT_PATH", "missing.crt", "no such file"}},
		{"unreadable key", []string{"TEMPORAL_TLS_CLIENT_CERT_PATH", certPath, "TEMPORAL_TLS_CLIENT_KEY_PATH", filepath.Join(dir, "nokey")},
			[]string{"TEMPORAL_TLS_CLIENT_KEY_PATH", "nokey"}},
		{"CA not PEM", []string{"TEMPORAL_TLS_SERVER_CA_CERT_DATA", "hello"}, []string{"TEMPORAL_TLS_SERVER_CA_CERT holds no PEM certificate"}},
		{"key of another cert", []string{"TEMPORAL_TLS_CLIENT_CERT_PATH", certPath, "TEMPORAL_TLS_CLIENT_KEY_DATA", string(other.KeyPEM)},
			[]string{"client certificate and key", "does not match"}},
		{"garbage key data", []string{"TEMPORAL_TLS_CLIENT_CERT_PATH", certPath, "TEMPORAL_TLS_CLIENT_KEY_DATA", secret},
			[]string{"client certificate and key"}},
		{"TLS off with certificates", []string{"TEMPORAL_TLS", "false", "TEMPORAL_TLS_SERVER_CA_CERT_DATA", string(ca.PEM)},
			[]string{"TEMPORAL_TLS=false turns TLS off"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(env(tc.env...))
			if err != nil {
				t.Fatal(err)
			}
			err = c.Validate()
			if err == nil {
				t.Fatal("Validate accepted it")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error = %v; want it to mention %q", err, w)
				}
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "PRIVATE KEY") {
				t.Errorf("error quotes key material: %v", err)
			}
		})
	}
	if _, err := Load(env("TEMPORAL_TLS", "yes")); err == nil || !strings.Contains(err.Error(), "TEMPORAL_TLS") {
		t.Errorf("TEMPORAL_TLS=yes: %v; want an error naming the variable", err)
	}
}

func TestTemporalSecretsAreNotFlags(t *testing.T) {
	c, err := Load(env())
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.RegisterFlags(fs)
	for _, name := range []string{"temporal-api-key", "temporal-tls-client-key-data"} {
		if fs.Lookup(name) != nil {
			t.Errorf("--%s exists; secrets must not show in process lists", name)
		}
	}
	// As the Temporal CLI's --tls, the flag needs no value.
	if err := fs.Parse([]string{"--temporal-tls", "--temporal-tls-server-name", "tmprl.example"}); err != nil {
		t.Fatal(err)
	}
	if !c.TemporalSecurity.TLSEnabled() || c.TemporalSecurity.ServerName != "tmprl.example" {
		t.Errorf("security = %+v", c.TemporalSecurity)
	}
}
