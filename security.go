package baton

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// SASL mechanisms WithSASL accepts.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// WithSASL authenticates every connection to the brokers with mechanism
// (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512). The password never appears in
// logs, errors or Status.
func WithSASL(mechanism, user, password string) Option {
	return func(c *config) {
		var m sasl.Mechanism
		switch strings.ToUpper(mechanism) {
		case SASLPlain:
			m = plain.Auth{User: user, Pass: password}.AsMechanism()
		case SASLScramSHA256:
			m = scram.Auth{User: user, Pass: password}.AsSha256Mechanism()
		case SASLScramSHA512:
			m = scram.Auth{User: user, Pass: password}.AsSha512Mechanism()
		default:
			c.OptErr = fmt.Errorf("%w: sasl mechanism: %q (want %s, %s or %s)", ErrConfig, mechanism, SASLPlain, SASLScramSHA256, SASLScramSHA512)
			return
		}
		if user == "" {
			c.OptErr = fmt.Errorf("%w: sasl user: must not be empty", ErrConfig)
			return
		}
		c.KgoOpts = append(c.KgoOpts, kgo.SASL(m))
	}
}

// WithTLS encrypts every connection to the brokers with cfg (nil: the
// system's roots, no client certificate).
func WithTLS(cfg *tls.Config) Option {
	return func(c *config) {
		if cfg == nil {
			cfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		c.KgoOpts = append(c.KgoOpts, kgo.DialTLSConfig(cfg.Clone()))
	}
}

// TLSFiles builds a client TLS config from PEM files: caFile (empty: the
// system's roots) and an optional client certificate and key.
func TLSFiles(caFile, certFile, keyFile, serverName string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("%w: tls ca: %v", ErrConfig, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: tls ca: %s holds no PEM certificate", ErrConfig, caFile)
		}
		cfg.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("%w: tls client certificate: give both the certificate and the key", ErrConfig)
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: tls client certificate: %v", ErrConfig, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
