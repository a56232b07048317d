package serverconfig_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq/server/serverconfig"
)

// grpcConfig is a configuration with an HTTP callback queue and a gRPC
// handler queue.
const grpcConfig = `{
  "callback": {"secret": "callbacks-are-signed-with-this", "allow": ["hooks.internal", "grpcs://payments.internal:8443"]},
  "queues": {
    "emails": {"url": "https://hooks.internal/emails", "handlers": ["send"]},
    "payments": {"url": "grpcs://payments.internal:8443", "handlers": ["charge"],
                 "metadata": {"x-team": "payments", "authorization": "Bearer literal"},
                 "metadata_env": {"authorization": "RDQ_TEST_PAYMENTS_AUTH"}}
  },
  "principals": [{"name": "shop", "token": "Vb9k2QpZ7xLm4TnR8sWc1YdF6hJg3KaE", "grants": [{"queue": "*", "role": "submitter"}]}]
}`

// A queue whose url is grpc or grpcs runs on a gRPC handler: it has a
// gRPC target with its metadata (the variable's value winning), and no
// HTTP callback target.
func TestGRPCQueues(t *testing.T) {
	t.Setenv("RDQ_TEST_PAYMENTS_AUTH", "Bearer from-the-environment")
	f, err := serverconfig.Parse([]byte(grpcConfig))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Targets()["payments"]; ok {
		t.Error("the gRPC queue has an HTTP callback target")
	}
	if got := f.Targets()["emails"].URL; got != "https://hooks.internal/emails" {
		t.Errorf("emails target = %q", got)
	}
	gt := f.GRPCTargets()
	if len(gt) != 1 || gt["payments"].URL != "grpcs://payments.internal:8443" ||
		gt["payments"].Metadata["authorization"] != "Bearer from-the-environment" || gt["payments"].Metadata["x-team"] != "payments" {
		t.Errorf("gRPC targets = %+v", gt)
	}
	cfg, err := f.GRPCConfig()
	if err != nil || cfg.TLS != nil || len(cfg.Allow) != 2 {
		t.Errorf("GRPCConfig = %+v, %v: want the allowlist and no TLS files", cfg, err)
	}
	if got := f.Handlers(); strings.Join(got, ",") != "charge,send" {
		t.Errorf("handlers = %v", got)
	}

	// A sample value in the metadata is reported like a sample secret.
	t.Setenv("RDQ_TEST_PAYMENTS_AUTH", "Bearer change-me")
	f, err = serverconfig.Parse([]byte(grpcConfig))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.SampleSecrets(); len(got) != 1 || got[0] != "queue payments metadata authorization (set RDQ_TEST_PAYMENTS_AUTH)" {
		t.Errorf("sample secrets = %q", got)
	}
}

// The TLS files of the callback section are the roots and the client
// certificate of the connections to gRPC handlers.
func TestGRPCTLSFiles(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := writePKI(t, dir)
	f, err := serverconfig.Parse([]byte(grpcConfig))
	if err != nil {
		t.Fatal(err)
	}
	f.Callback.TLSCAFile, f.Callback.TLSCertFile, f.Callback.TLSKeyFile = ca, cert, key
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.GRPCConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLS == nil || cfg.TLS.RootCAs == nil || len(cfg.TLS.Certificates) != 1 {
		t.Errorf("TLS = %+v, want the CA and a client certificate", cfg.TLS)
	}
}

// Every mistake about gRPC queues is an error naming the setting.
func TestGRPCMistakes(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	inPayments := func(change func(q *serverconfig.Queue)) func(f *serverconfig.File) {
		return func(f *serverconfig.File) {
			q := f.Queues["payments"]
			change(&q)
			f.Queues["payments"] = q
		}
	}
	cases := map[string]struct {
		change func(f *serverconfig.File)
		want   string
	}{
		"secret": {inPayments(func(q *serverconfig.Queue) { q.Secret = "a-secret-for-the-handler-0123" }),
			"queues.payments.secret: a gRPC handler's calls are not signed: remove the secret"},
		"metadata key": {inPayments(func(q *serverconfig.Queue) { q.Metadata = map[string]string{"grpc-timeout": "1S"} }),
			`queues.payments.metadata: rdq: invalid input: grpccall: metadata key "grpc-timeout" is reserved`},
		"metadata value": {inPayments(func(q *serverconfig.Queue) { q.Metadata = map[string]string{"authorization": "Bearer a\nb"} }),
			`queues.payments.metadata: rdq: invalid input: grpccall: the value of metadata key "authorization" holds a byte (0x0a)`},
		"metadata_env key": {inPayments(func(q *serverconfig.Queue) { q.MetadataEnv = map[string]string{"Authorization": "X"} }),
			`queues.payments.metadata_env: rdq: invalid input: grpccall: metadata key "Authorization": use lower case letters`},
		"metadata on http": {func(f *serverconfig.File) {
			q := f.Queues["emails"]
			q.Metadata = map[string]string{"authorization": "x"}
			f.Queues["emails"] = q
		}, "queues.emails.metadata: only gRPC handlers (grpcs:// or grpc:// urls) take metadata"},
		"not allowed": {inPayments(func(q *serverconfig.Queue) {
			q.URL, q.Metadata, q.MetadataEnv = "grpc://payments.internal:8443", nil, nil
		}),
			"queues.payments.url: rdq: invalid input: callback: target is not on the allowlist: grpc://payments.internal:8443: list it (or a prefix of it) in callback.allow"},
		"metadata in plaintext": {func(f *serverconfig.File) {
			f.Callback.Allow = append(f.Callback.Allow, "grpc://payments.internal:8443")
			q := f.Queues["payments"]
			q.URL = "grpc://payments.internal:8443"
			q.Metadata = map[string]string{"authorization": "Bearer x"}
			f.Queues["payments"] = q
		}, "queues.payments.metadata: a grpc:// handler's calls are not encrypted, and its metadata would cross the network readable: use grpcs://, or set allow_plaintext_metadata: true"},
		"metadata_env in plaintext": {func(f *serverconfig.File) {
			f.Callback.Allow = append(f.Callback.Allow, "grpc://payments.internal:8443")
			q := f.Queues["payments"]
			q.URL = "grpc://payments.internal:8443"
			q.Metadata, q.MetadataEnv = nil, map[string]string{"authorization": "PAYMENTS_TOKEN"}
			f.Queues["payments"] = q
		}, "queues.payments.metadata: a grpc:// handler's calls are not encrypted"},
		"path": {inPayments(func(q *serverconfig.Queue) { q.URL = "grpcs://payments.internal:8443/rdq" }),
			"queues.payments.url: rdq: invalid input: grpccall: grpcs://payments.internal:8443/rdq: a gRPC handler is addressed as grpcs://host:port"},
		"half of tls": {func(f *serverconfig.File) { f.Callback.TLSCertFile = notPEM },
			"callback.tls_cert_file and callback.tls_key_file: set both"},
		"ca file": {func(f *serverconfig.File) { f.Callback.TLSCAFile = notPEM },
			"callback.tls_ca_file " + notPEM + " holds no PEM certificate"},
		"missing ca file": {func(f *serverconfig.File) { f.Callback.TLSCAFile = filepath.Join(dir, "missing.pem") },
			"callback.tls_ca_file: open "},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f, err := serverconfig.Parse([]byte(grpcConfig))
			if err != nil {
				t.Fatal(err)
			}
			tc.change(f)
			err = f.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v\nwant one containing %q", err, tc.want)
			}
			if n := strings.Count(err.Error(), "\n") + 1; n != 1 {
				t.Errorf("%d errors, want this one alone: %v", n, err)
			}
		})
	}
	// A configuration whose queues all run on gRPC handlers needs no
	// callback secret.
	f, err := serverconfig.Parse([]byte(grpcConfig))
	if err != nil {
		t.Fatal(err)
	}
	delete(f.Queues, "emails")
	f.Callback.Secret = ""
	if err := f.Validate(); err != nil {
		t.Errorf("gRPC queues only, no secret: %v", err)
	}
}

// writePKI writes a CA certificate, and a client certificate and key it
// signed, as PEM files in dir.
func writePKI(t *testing.T, dir string) (ca, cert, key string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	clientKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	clientDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "rdq"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, caCert, &clientKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(clientKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("client.pem", "CERTIFICATE", clientDER), write("client.key", "EC PRIVATE KEY", keyDER)
}

// Metadata goes to a grpc:// handler only on this machine or with
// allow_plaintext_metadata.
func TestGRPCPlaintextMetadata(t *testing.T) {
	conf := func(url, extra string) string {
		return `{
  "callback": {"secret": "callbacks-are-signed-with-this", "allow": ["` + url + `"]},
  "queues": {"payments": {"url": "` + url + `", "handlers": ["charge"], "metadata": {"authorization": "Bearer literal"}` + extra + `}},
  "principals": [{"name": "shop", "token": "Vb9k2QpZ7xLm4TnR8sWc1YdF6hJg3KaE", "grants": [{"queue": "*", "role": "submitter"}]}]
}`
	}
	for _, c := range []struct {
		conf string
		ok   bool
	}{
		{conf("grpc://127.0.0.1:9090", ""), true},
		{conf("grpc://[::1]:9090", ""), true},
		{conf("grpc://localhost:9090", ""), true},
		{conf("grpcs://payments.internal:8443", ""), true},
		{conf("grpc://payments.internal:8443", ""), false},
		{conf("grpc://10.0.0.7:8443", ""), false},
		{conf("grpc://payments.internal:8443", `, "allow_plaintext_metadata": true`), true},
	} {
		f, err := serverconfig.Parse([]byte(c.conf))
		if err == nil {
			err = f.Validate()
		}
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), "allow_plaintext_metadata: true")) {
			t.Errorf("%s: %v, want ok %t", c.conf, err, c.ok)
		}
	}
}
