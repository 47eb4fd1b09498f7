package baton

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/baton-streams/baton/cluster"
	"github.com/baton-streams/baton/topology"
)

const secret = "p4ss-w0rd-never-logged"

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runBriefly runs a wordcount App until it owns every task (or fails) and
// returns Run's error and everything it logged.
func runBriefly(t *testing.T, brokers []string, opts ...Option) (string, error) {
	t.Helper()
	top, err := topology.WordCount("sec", "lines", "counts")
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	all := append([]Option{WithBrokers(brokers...), WithAppID("sec"), WithStateDir(t.TempDir()),
		WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))}, opts...)
	app, err := New(top, all...)
	if err != nil {
		return logs.String(), err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := goRun(t, ctx, app)
	deadline := time.After(20 * time.Second)
	for {
		select {
		case err := <-done:
			cancel()
			return logs.String(), err
		case <-deadline:
			cancel()
			app.Leave()
			return logs.String(), errors.New("timed out")
		case <-time.After(50 * time.Millisecond):
		}
		active := 0
		for _, ts := range app.Status().Tasks {
			if ts.Role == "active" {
				active++
			}
		}
		if active == 8 { // 4 partitions, 2 subtopologies
			cancel()
			app.Leave()
			err := <-done
			return logs.String(), err
		}
	}
}

func createLines(t *testing.T, brokers []string, opts ...kgo.Opt) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.AllowAutoTopicCreation()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "lines", Value: []byte("a b")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func TestSASL(t *testing.T) {
	for _, mech := range []string{SASLPlain, SASLScramSHA256, SASLScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			c, err := cluster.Start("127.0.0.1:0", 1, kfake.EnableSASL(), kfake.Superuser(mech, "app", secret))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			admin := runOpts(t, mech, "app", secret)
			createLines(t, c.Addrs(), admin...)
			if logs, err := runBriefly(t, c.Addrs(), WithSASL(mech, "app", secret), WithCreateSinks(nil)); err != nil {
				t.Fatalf("with the right password: %v\n%s", err, logs)
			} else if strings.Contains(logs, secret) {
				t.Error("the password appears in the logs")
			}
			logs, err := runBriefly(t, refusing(t, mech), WithSASL(mech, "app", "wrong-"+secret))
			// Refused for the password, at once: not a time-out, not
			// "unreachable".
			if !errors.Is(err, ErrAuth) || !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("with a wrong password: %v, want ErrAuth wrapping SASL_AUTHENTICATION_FAILED", err)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(logs, secret) {
				t.Errorf("the password leaks: error %q", err)
			}
		})
	}
}

// refusing starts a SASL cluster that refuses every authentication as
// Apache Kafka refuses a wrong password: a SaslAuthenticate response with
// SASL_AUTHENTICATION_FAILED. (kfake itself closes the connection, which
// a client cannot tell from a network failure.)
func refusing(t *testing.T, mech string) []string {
	t.Helper()
	k, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser(mech, "app", secret))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	k.ControlKey(int16(kmsg.SASLAuthenticate), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.Version = req.GetVersion()
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("Authentication failed: Invalid username or password")
		return resp, nil, true
	})
	return k.ListenAddrs()
}

func runOpts(t *testing.T, mech, user, pass string) []kgo.Opt {
	var c config
	WithSASL(mech, user, pass)(&c)
	if c.OptErr != nil {
		t.Fatal(c.OptErr)
	}
	return c.KgoOpts
}

func TestSASLBadMechanism(t *testing.T) {
	top, _ := topology.WordCount("x", "in", "out")
	_, err := New(top, WithBrokers("127.0.0.1:1"), WithAppID("x"), WithStateDir(t.TempDir()), WithSASL("GSSAPI", "u", secret))
	if !errors.Is(err, ErrConfig) || strings.Contains(err.Error(), secret) {
		t.Errorf("err = %v", err)
	}
}

func TestTLS(t *testing.T) {
	serverCfg, pool := selfSigned(t)
	c, err := cluster.Start("127.0.0.1:0", 1, kfake.TLS(serverCfg))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	client := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	createLines(t, c.Addrs(), kgo.DialTLSConfig(client))
	if logs, err := runBriefly(t, c.Addrs(), WithTLS(client), WithCreateSinks(nil)); err != nil {
		t.Fatalf("over TLS: %v\n%s", err, logs)
	}
	// Without TLS the brokers cannot be spoken to: a clear error.
	if _, err := runBriefly(t, c.Addrs()); !errors.Is(err, ErrBrokers) {
		t.Errorf("plaintext against a TLS cluster: %v, want ErrBrokers", err)
	}
}

// selfSigned makes a server config for 127.0.0.1 and a pool trusting it.
func selfSigned(t *testing.T) (*tls.Config, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "baton-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}, pool
}
