package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.temporal.io/sdk/client"
)

// TemporalSecurity is how the roles prove themselves to, and check, a
// Temporal cluster they did not start: Temporal Cloud or any cluster with
// TLS, mutual TLS or API keys. The variables and their meaning are the
// Temporal CLI's, so one environment serves both tools. It holds secrets
// (the API key, the client key): never log it, and errors never quote it.
type TemporalSecurity struct {
	APIKey string
	// TLS is TEMPORAL_TLS when it is set: true turns TLS on, false off
	// even with an API key (a cluster that checks keys over plain gRPC).
	// Unset, TLS is on as soon as any certificate, key, CA or API key is
	// given.
	TLS *bool
	// Each certificate, key and CA comes from a file (Path) or from the
	// variable itself (Data, PEM), never both.
	ClientCertPath, ClientCertData     string
	ClientKeyPath, ClientKeyData       string
	ServerCACertPath, ServerCACertData string
	// ServerName is the name the server's certificate must carry, when it
	// differs from the host of TEMPORAL_ADDRESS.
	ServerName string
	// DisableHostVerification accepts any server certificate: for tests
	// only, it lets anyone in the middle read the traffic.
	DisableHostVerification bool
}

// parseBool reads a boolean the way the Temporal CLI does: true, false, 1
// or 0, in any case.
func parseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true":
		return true, nil
	case "0", "false":
		return false, nil
	}
	return false, errors.New("must be true or false")
}

// tlsRequested says whether anything but TEMPORAL_TLS asks for TLS.
func (s TemporalSecurity) tlsRequested() bool {
	return s.APIKey != "" || s.ClientCertPath != "" || s.ClientCertData != "" || s.ClientKeyPath != "" ||
		s.ClientKeyData != "" || s.ServerCACertPath != "" || s.ServerCACertData != "" ||
		s.ServerName != "" || s.DisableHostVerification
}

// TLSEnabled says whether connections to Temporal use TLS.
func (s TemporalSecurity) TLSEnabled() bool {
	if s.TLS != nil {
		return *s.TLS
	}
	return s.tlsRequested()
}

// Configured says whether any of the security settings is given.
func (s TemporalSecurity) Configured() bool { return s.TLS != nil || s.tlsRequested() }

// validate checks the settings together without reading any file.
func (s TemporalSecurity) validate() []error {
	var errs []error
	pairs := []struct{ path, data, name string }{
		{s.ClientCertPath, s.ClientCertData, "TEMPORAL_TLS_CLIENT_CERT"},
		{s.ClientKeyPath, s.ClientKeyData, "TEMPORAL_TLS_CLIENT_KEY"},
		{s.ServerCACertPath, s.ServerCACertData, "TEMPORAL_TLS_SERVER_CA_CERT"},
	}
	for _, p := range pairs {
		if p.path != "" && p.data != "" {
			errs = append(errs, fmt.Errorf("set %s_PATH or %s_DATA, not both", p.name, p.name))
		}
	}
	hasCert := s.ClientCertPath != "" || s.ClientCertData != ""
	hasKey := s.ClientKeyPath != "" || s.ClientKeyData != ""
	if hasCert && !hasKey {
		errs = append(errs, errors.New("a client certificate needs its private key: set TEMPORAL_TLS_CLIENT_KEY_PATH or TEMPORAL_TLS_CLIENT_KEY_DATA"))
	}
	if hasKey && !hasCert {
		errs = append(errs, errors.New("a client key needs its certificate: set TEMPORAL_TLS_CLIENT_CERT_PATH or TEMPORAL_TLS_CLIENT_CERT_DATA"))
	}
	if s.TLS != nil && !*s.TLS && (hasCert || hasKey || s.ServerCACertPath != "" || s.ServerCACertData != "" ||
		s.ServerName != "" || s.DisableHostVerification) {
		errs = append(errs, errors.New("TEMPORAL_TLS=false turns TLS off, yet TLS certificates or options are set; drop one or the other"))
	}
	return errs
}

// ClientTLS builds the TLS configuration of connections to Temporal, or
// nil when TLS is off. It reads the certificate files, so it also tells
// whether they are there and fit together. Errors name the variable at
// fault, never the key or PEM data.
func (s TemporalSecurity) ClientTLS() (*tls.Config, error) {
	if errs := s.validate(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if !s.TLSEnabled() {
		return nil, nil
	}
	conf := &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: s.ServerName,
		// The operator asked for this by name, for test clusters.
		InsecureSkipVerify: s.DisableHostVerification,
	}
	if s.ClientCertPath != "" || s.ClientCertData != "" {
		certPEM, err := pemFrom(s.ClientCertPath, s.ClientCertData, "TEMPORAL_TLS_CLIENT_CERT")
		if err != nil {
			return nil, err
		}
		keyPEM, err := pemFrom(s.ClientKeyPath, s.ClientKeyData, "TEMPORAL_TLS_CLIENT_KEY")
		if err != nil {
			return nil, err
		}
		// crypto/tls's own messages say what is wrong without quoting the
		// key; they are kept.
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("client certificate and key (TEMPORAL_TLS_CLIENT_CERT_*, TEMPORAL_TLS_CLIENT_KEY_*): %w", err)
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	if s.ServerCACertPath != "" || s.ServerCACertData != "" {
		caPEM, err := pemFrom(s.ServerCACertPath, s.ServerCACertData, "TEMPORAL_TLS_SERVER_CA_CERT")
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, errors.New("TEMPORAL_TLS_SERVER_CA_CERT holds no PEM certificate")
		}
		conf.RootCAs = pool
	}
	return conf, nil
}

// pemFrom reads a file or takes the variable's own data.
func pemFrom(path, data, name string) ([]byte, error) {
	if data != "" {
		return []byte(data), nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		// The error names the path, which is no secret.
		return nil, fmt.Errorf("%s_PATH: %w", name, err)
	}
	return b, nil
}

// Apply sets the TLS and credentials of connections to a Temporal cluster
// on opts.
func (s TemporalSecurity) Apply(opts *client.Options) error {
	conf, err := s.ClientTLS()
	if err != nil {
		return err
	}
	opts.ConnectionOptions.TLS = conf
	// Without this the SDK turns TLS on by itself for an API key.
	opts.ConnectionOptions.TLSDisabled = conf == nil
	if s.APIKey != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(s.APIKey)
	}
	return nil
}
