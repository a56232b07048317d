package grpccall

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/callback"
	"github.com/srjn45/rdq/proto/rdqv1"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	goleak.VerifyTestMain(m)
}

// handler is a HandlerService whose answer a test decides; it records the
// requests and their metadata.
type handler struct {
	rdqv1.UnimplementedHandlerServiceServer
	answer func(ctx context.Context, req *rdqv1.ExecuteRequest) (*rdqv1.ExecuteResponse, error)

	mu    sync.Mutex
	reqs  []*rdqv1.ExecuteRequest
	mds   []metadata.MD
	calls int
}

func (h *handler) Execute(ctx context.Context, req *rdqv1.ExecuteRequest) (*rdqv1.ExecuteResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	h.mu.Lock()
	h.reqs = append(h.reqs, req)
	h.mds = append(h.mds, md)
	h.calls++
	h.mu.Unlock()
	return h.answer(ctx, req)
}

func (h *handler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

func answer(resp *rdqv1.ExecuteResponse) func(context.Context, *rdqv1.ExecuteRequest) (*rdqv1.ExecuteResponse, error) {
	return func(context.Context, *rdqv1.ExecuteRequest) (*rdqv1.ExecuteResponse, error) { return resp, nil }
}

var success = &rdqv1.ExecuteResponse{Outcome: &rdqv1.ExecuteResponse_Success{Success: &rdqv1.Success{}}}

// serveHandler serves h on a loopback port, with opts (TLS, interceptors),
// and returns its address.
func serveHandler(t testing.TB, h *handler, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	rdqv1.RegisterHandlerServiceServer(srv, h)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("handler server: %v", err)
		}
	})
	return lis.Addr().String()
}

func newCaller(t testing.TB, cfg Config) *Caller {
	t.Helper()
	if cfg.Allow == nil {
		cfg.Allow = []string{"127.0.0.1"}
	}
	if cfg.AllowAddrs == nil {
		cfg.AllowAddrs = []string{"127.0.0.1"}
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

func mustHandler(t *testing.T, c *Caller, target Target) func(context.Context, *rdq.Task) error {
	t.Helper()
	h, err := c.Handler(target)
	if err != nil {
		t.Fatalf("Handler(%s): %v", target.URL, err)
	}
	return h
}

func testTask() *rdq.Task {
	return &rdq.Task{
		ID: rdq.NewID(), Queue: "orders", Handler: "charge", Payload: []byte{0, 1, 2, 0xff}, ContentType: "application/octet-stream",
		Headers:  map[string]string{"tenant": "acme", "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		Attempts: 2, Life: 1, LeaseToken: 41,
	}
}

// The call carries the task's identity, payload and headers, the trace
// context of its headers and the target's metadata.
func TestSuccessSendsTheExecution(t *testing.T) {
	h := &handler{answer: answer(success)}
	addr := serveHandler(t, h)
	c := newCaller(t, Config{})
	call := mustHandler(t, c, Target{URL: "grpc://" + addr, Metadata: map[string]string{"authorization": "Bearer s3cret", "x-team": "payments"}})
	task := testTask()
	if err := call(context.Background(), task); err != nil {
		t.Fatalf("call: %v", err)
	}
	if h.count() != 1 {
		t.Fatalf("calls = %d, want 1", h.count())
	}
	req, md := h.reqs[0], h.mds[0]
	if req.GetId() != task.ID.String() || req.GetQueue() != "orders" || req.GetHandler() != "charge" ||
		req.GetAttempt() != int32(task.NextAttempt()) || req.GetAttempt() != 3 || req.GetLife() != 1 || req.GetLeaseToken() != 41 ||
		req.GetContentType() != "application/octet-stream" || string(req.GetPayload()) != string(task.Payload) || req.GetHeaders()["tenant"] != "acme" {
		t.Errorf("request = %v", req)
	}
	if got := md.Get("traceparent"); len(got) != 1 || got[0] != task.Headers["traceparent"] {
		t.Errorf("traceparent metadata = %q, want the task's", got)
	}
	if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer s3cret" {
		t.Errorf("authorization metadata = %q", got)
	}
	if got := md.Get("x-team"); len(got) != 1 || got[0] != "payments" {
		t.Errorf("x-team metadata = %q", got)
	}
	if ua := md.Get("user-agent"); len(ua) != 1 || !strings.HasPrefix(ua[0], "rdq-grpccall") {
		t.Errorf("user-agent = %q", ua)
	}

	// A task whose traceparent is not valid sends none.
	task.Headers["traceparent"] = "not-a-traceparent"
	if err := call(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	if got := h.mds[1].Get("traceparent"); len(got) != 0 {
		t.Errorf("invalid traceparent sent as %q", got)
	}
}

func TestOutcomes(t *testing.T) {
	failure := &rdqv1.Failure{ErrorType: "ValueError", Message: "order 42 has no lines", Stack: "Traceback (most recent call last):\n  File \"h.py\", line 3"}
	cases := []struct {
		name       string
		resp       *rdqv1.ExecuteResponse
		wantErr    bool
		permanent  bool
		retryAfter time.Duration // -1: none
		wantType   string
		remote     bool
	}{
		{name: "success", resp: success, retryAfter: -1},
		{name: "retryable", resp: &rdqv1.ExecuteResponse{Outcome: &rdqv1.ExecuteResponse_Retryable{Retryable: failure}}, wantErr: true, retryAfter: -1, wantType: "ValueError", remote: true},
		{name: "permanent", resp: &rdqv1.ExecuteResponse{Outcome: &rdqv1.ExecuteResponse_Permanent{Permanent: failure}}, wantErr: true, permanent: true, retryAfter: -1, wantType: "ValueError", remote: true},
		{name: "retry after", resp: &rdqv1.ExecuteResponse{Outcome: &rdqv1.ExecuteResponse_RetryAfter{RetryAfter: &rdqv1.RetryAfter{DelayMs: 1500, Failure: failure}}},
			wantErr: true, retryAfter: 1500 * time.Millisecond, wantType: "ValueError", remote: true},
		{name: "retry after capped", resp: &rdqv1.ExecuteResponse{Outcome: &rdqv1.ExecuteResponse_RetryAfter{RetryAfter: &rdqv1.RetryAfter{DelayMs: 1 << 62, Failure: failure}}},
			wantErr: true, retryAfter: 10 * time.Second, wantType: "ValueError", remote: true},
		{name: "retry after negative", resp: &rdqv1.ExecuteResponse{Outcome: &rdqv1.ExecuteResponse_RetryAfter{RetryAfter: &rdqv1.RetryAfter{DelayMs: -5}}},
			wantErr: true, retryAfter: 0, wantType: "error"},
		{name: "no outcome", resp: &rdqv1.ExecuteResponse{}, wantErr: true, retryAfter: -1, wantType: "grpc_no_outcome"},
		{name: "empty failure", resp: &rdqv1.ExecuteResponse{Outcome: &rdqv1.ExecuteResponse_Retryable{}}, wantErr: true, retryAfter: -1, wantType: "error"},
		{name: "reserved type", resp: &rdqv1.ExecuteResponse{Outcome: &rdqv1.ExecuteResponse_Permanent{Permanent: &rdqv1.Failure{ErrorType: "lease_expired", Message: "m"}}},
			wantErr: true, permanent: true, retryAfter: -1, wantType: "remote_lease_expired"},
	}
	h := &handler{}
	addr := serveHandler(t, h)
	c := newCaller(t, Config{MaxRetryAfter: 10 * time.Second})
	call := mustHandler(t, c, Target{URL: "grpc://" + addr})
	for _, tc := range cases {
		h.answer = answer(tc.resp)
		err := call(context.Background(), testTask())
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: err = %v, want error %v", tc.name, err, tc.wantErr)
			continue
		}
		if err == nil {
			continue
		}
		if rdq.IsPermanent(err) != tc.permanent {
			t.Errorf("%s: permanent = %v, want %v (%v)", tc.name, rdq.IsPermanent(err), tc.permanent, err)
		}
		d, ok := rdq.RetryAfterOf(err)
		if tc.retryAfter < 0 && ok || tc.retryAfter >= 0 && (!ok || d != tc.retryAfter) {
			t.Errorf("%s: retry after = %s %v, want %s", tc.name, d, ok, tc.retryAfter)
		}
		f := rdq.Describe(err)
		if f.Type != tc.wantType {
			t.Errorf("%s: error type = %q, want %q", tc.name, f.Type, tc.wantType)
		}
		if tc.remote && (f.Message != failure.Message || f.Stack != failure.Stack) {
			t.Errorf("%s: recorded %q / %q, want the handler's message and stack", tc.name, f.Message, f.Stack)
		}
	}
}

// A remote failure's text is cleaned and capped when it is recorded; a
// status message is cut to MaxStatusMessage.
func TestFailureTextIsCleanedAndCapped(t *testing.T) {
	h := &handler{}
	addr := serveHandler(t, h)
	c := newCaller(t, Config{MaxStatusMessage: 64})
	call := mustHandler(t, c, Target{URL: "grpc://" + addr})

	h.answer = answer(&rdqv1.ExecuteResponse{Outcome: &rdqv1.ExecuteResponse_Retryable{Retryable: &rdqv1.Failure{
		ErrorType: "Boom", Message: "\x1b[31mred\x00" + strings.Repeat("m", 2*rdq.MaxMessageBytes), Stack: strings.Repeat("s", rdq.MaxStackBytes+1<<10),
	}}})
	f := rdq.Describe(call(context.Background(), testTask()))
	if len(f.Message) > rdq.MaxMessageBytes || !strings.Contains(f.Message, "truncated") || strings.ContainsRune(f.Message, 0) {
		t.Errorf("message not capped and cleaned: %d bytes %q…", len(f.Message), f.Message[:20])
	}
	if len(f.Stack) > rdq.MaxStackBytes || !strings.Contains(f.Stack, "truncated") {
		t.Errorf("stack not capped: %d bytes", len(f.Stack))
	}

	h.answer = func(context.Context, *rdqv1.ExecuteRequest) (*rdqv1.ExecuteResponse, error) {
		return nil, status.Error(codes.Internal, "é"+strings.Repeat("x", 200))
	}
	err := call(context.Background(), testTask())
	var se *StatusError
	if !errors.As(err, &se) || !strings.HasSuffix(se.Message, "…[truncated]") || len(se.Message) > 64+len("…[truncated]") || !strings.HasPrefix(se.Message, "é") {
		t.Errorf("status message = %q (%v), want its first 64 bytes and a mark", se.Message, err)
	}
}

// Status codes map to permanent or retryable failures named after them.
func TestStatusCodes(t *testing.T) {
	h := &handler{}
	addr := serveHandler(t, h)
	c := newCaller(t, Config{})
	call := mustHandler(t, c, Target{URL: "grpc://" + addr})
	cases := map[codes.Code]struct {
		typ       string
		permanent bool
	}{
		codes.Unavailable:        {"grpc_unavailable", false},
		codes.Internal:           {"grpc_internal", false},
		codes.Unknown:            {"grpc_unknown", false},
		codes.ResourceExhausted:  {"grpc_resource_exhausted", false},
		codes.DeadlineExceeded:   {"grpc_deadline_exceeded", false},
		codes.Aborted:            {"grpc_aborted", false},
		codes.NotFound:           {"grpc_not_found", false},
		codes.InvalidArgument:    {"grpc_invalid_argument", true},
		codes.FailedPrecondition: {"grpc_failed_precondition", true},
		codes.Unimplemented:      {"grpc_unimplemented", true},
		codes.PermissionDenied:   {"grpc_permission_denied", true},
		codes.Unauthenticated:    {"grpc_unauthenticated", true},
	}
	for code, want := range cases {
		h.answer = func(context.Context, *rdqv1.ExecuteRequest) (*rdqv1.ExecuteResponse, error) {
			return nil, status.Error(code, "handler said no")
		}
		err := call(context.Background(), testTask())
		var se *StatusError
		if !errors.As(err, &se) || se.Code != code {
			t.Errorf("%s: err = %v, want a StatusError", code, err)
			continue
		}
		if got := rdq.ErrorTypeOf(err); got != want.typ {
			t.Errorf("%s: error type = %q, want %q", code, got, want.typ)
		}
		if rdq.IsPermanent(err) != want.permanent {
			t.Errorf("%s: permanent = %v, want %v", code, rdq.IsPermanent(err), want.permanent)
		}
		if !strings.Contains(err.Error(), "handler said no") || !strings.Contains(err.Error(), "grpc://"+addr) {
			t.Errorf("%s: message %q lacks the target or the status message", code, err)
		}
	}
	// A handler not implementing the service at all is permanent.
	bare := serveHandlerless(t)
	err := mustHandler(t, c, Target{URL: "grpc://" + bare})(context.Background(), testTask())
	if !rdq.IsPermanent(err) || rdq.ErrorTypeOf(err) != "grpc_unimplemented" {
		t.Errorf("no HandlerService: err = %v (%s), want a permanent grpc_unimplemented", err, rdq.ErrorTypeOf(err))
	}
}

// serveHandlerless serves a gRPC server with no service.
func serveHandlerless(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	return lis.Addr().String()
}

// A call that outlives Config.Timeout is a timeout, and the handler's
// context ends; the worker's shorter deadline ends it earlier.
func TestDeadline(t *testing.T) {
	ended := make(chan error, 4)
	release := make(chan struct{})
	// The handler sees its context end, then answers only when the test
	// ends: the caller's own deadline decides.
	h := &handler{answer: func(ctx context.Context, _ *rdqv1.ExecuteRequest) (*rdqv1.ExecuteResponse, error) {
		if _, ok := ctx.Deadline(); !ok {
			ended <- errors.New("the call has no deadline")
		} else {
			<-ctx.Done()
			ended <- ctx.Err()
		}
		<-release
		return success, nil
	}}
	addr := serveHandler(t, h)
	t.Cleanup(func() { close(release) }) // before the server stops
	c := newCaller(t, Config{Timeout: 300 * time.Millisecond})
	call := mustHandler(t, c, Target{URL: "grpc://" + addr})

	err := call(context.Background(), testTask())
	var te *rdq.TimeoutError
	if !errors.As(err, &te) || te.After != 300*time.Millisecond || rdq.IsPermanent(err) || rdq.ErrorTypeOf(err) != "timeout" {
		t.Errorf("err = %v, want a retryable TimeoutError after 300ms", err)
	}
	if got := <-ended; !errors.Is(got, context.DeadlineExceeded) && !errors.Is(got, context.Canceled) {
		t.Errorf("the handler's context ended with %v", got)
	}

	// The worker's context, with its own deadline and cause.
	cause := &rdq.TimeoutError{After: 50 * time.Millisecond}
	ctx, cancel := context.WithTimeoutCause(context.Background(), 50*time.Millisecond, cause)
	defer cancel()
	long := newCaller(t, Config{Timeout: time.Hour})
	err = mustHandler(t, long, Target{URL: "grpc://" + addr})(ctx, testTask())
	if !errors.Is(err, cause) {
		t.Errorf("err = %v, want the worker's cause", err)
	}
	if got := <-ended; got == nil {
		t.Error("the handler's context did not end with the worker's")
	}
}

// pki is a test CA with a server and a client certificate.
type pki struct {
	roots  *x509.CertPool
	server tls.Certificate
	client tls.Certificate
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rdq test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(serial int64, usage x509.ExtKeyUsage) tls.Certificate {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "rdq test"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	}
	p := &pki{roots: x509.NewCertPool(), server: issue(2, x509.ExtKeyUsageServerAuth), client: issue(3, x509.ExtKeyUsageClientAuth)}
	p.roots.AddCert(ca)
	return p
}

func TestTLS(t *testing.T) {
	p := newPKI(t)
	h := &handler{answer: answer(success)}
	addr := serveHandler(t, h, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{p.server}, MinVersion: tls.VersionTLS12})))

	trusted := newCaller(t, Config{TLS: &tls.Config{RootCAs: p.roots}})
	if err := mustHandler(t, trusted, Target{URL: "grpcs://" + addr})(context.Background(), testTask()); err != nil {
		t.Errorf("grpcs with the CA: %v", err)
	}
	// The system's roots do not know the test CA: the handshake fails,
	// a retryable failure that reaches no handler.
	system := newCaller(t, Config{})
	err := mustHandler(t, system, Target{URL: "grpcs://" + addr})(context.Background(), testTask())
	if err == nil || rdq.IsPermanent(err) || rdq.ErrorTypeOf(err) != "grpc_unavailable" {
		t.Errorf("untrusted server: err = %v (%s), want a retryable grpc_unavailable", err, rdq.ErrorTypeOf(err))
	}
	// Plaintext to a TLS server fails too.
	if err := mustHandler(t, trusted, Target{URL: "grpc://" + addr})(context.Background(), testTask()); err == nil {
		t.Error("plaintext call to a TLS server succeeded")
	}
	if h.count() != 1 {
		t.Errorf("handler calls = %d, want 1", h.count())
	}
	if _, err := trusted.Handler(Target{URL: "grpc://" + addr, TLS: &tls.Config{}}); !errors.Is(err, rdq.ErrInvalid) {
		t.Errorf("TLS for a plaintext target: err = %v, want ErrInvalid", err)
	}
}

func TestMutualTLS(t *testing.T) {
	p := newPKI(t)
	h := &handler{answer: answer(success)}
	addr := serveHandler(t, h, grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{p.server}, ClientCAs: p.roots, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	})))
	c := newCaller(t, Config{TLS: &tls.Config{RootCAs: p.roots}})
	if err := mustHandler(t, c, Target{URL: "grpcs://" + addr})(context.Background(), testTask()); err == nil {
		t.Error("a call without a client certificate succeeded")
	}
	withCert := mustHandler(t, c, Target{URL: "grpcs://" + addr, TLS: &tls.Config{RootCAs: p.roots, Certificates: []tls.Certificate{p.client}}})
	if err := withCert(context.Background(), testTask()); err != nil {
		t.Errorf("with a client certificate: %v", err)
	}
	if h.count() != 1 {
		t.Errorf("handler calls = %d, want 1", h.count())
	}
}

// A handler refusing the target's metadata fails the task for good; the
// right metadata is accepted.
func TestAuthMetadata(t *testing.T) {
	h := &handler{answer: answer(success)}
	auth := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if v := md.Get("authorization"); len(v) != 1 || v[0] != "Bearer right-token" {
			return nil, status.Error(codes.Unauthenticated, "bad or missing token")
		}
		return next(ctx, req)
	}
	addr := serveHandler(t, h, grpc.UnaryInterceptor(auth))
	c := newCaller(t, Config{})
	for _, md := range []map[string]string{nil, {"authorization": "Bearer wrong-token"}} {
		err := mustHandler(t, c, Target{URL: "grpc://" + addr, Metadata: md})(context.Background(), testTask())
		if !rdq.IsPermanent(err) || rdq.ErrorTypeOf(err) != "grpc_unauthenticated" {
			t.Errorf("metadata %v: err = %v, want a permanent grpc_unauthenticated", md, err)
		}
	}
	right := mustHandler(t, c, Target{URL: "grpc://" + addr, Metadata: map[string]string{"authorization": "Bearer right-token"}})
	if err := right(context.Background(), testTask()); err != nil {
		t.Errorf("right token: %v", err)
	}
	if h.count() != 1 {
		t.Errorf("handler calls = %d, want 1", h.count())
	}
}

func TestMetadataIsChecked(t *testing.T) {
	c := newCaller(t, Config{})
	for _, md := range []map[string]string{
		{"Authorization": "x"}, {"grpc-timeout": "1S"}, {"traceparent": "x"}, {"key-bin": "x"}, {"": "x"},
		{"x-ok": "line\nbreak"}, {"x-ok": "é"}, {"bad key": "x"},
	} {
		if _, err := c.Handler(Target{URL: "grpc://127.0.0.1:1", Metadata: md}); !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("metadata %q: err = %v, want ErrInvalid", md, err)
		}
	}
}

// Targets are checked against the allowlist at registration and at every
// call, and connections against the internal addresses at dial time.
func TestAllowlist(t *testing.T) {
	h := &handler{answer: answer(success)}
	addr := serveHandler(t, h)
	_, port, _ := net.SplitHostPort(addr)
	c := newCaller(t, Config{Allow: []string{"grpcs://handlers.example.com:8443", "127.0.0.1:" + port, "bare.example.org"}})
	for target, ok := range map[string]bool{
		"grpc://127.0.0.1:" + port:                 true,
		"grpcs://127.0.0.1:" + port:                true,
		"grpcs://handlers.example.com:8443":        true,
		"grpc://handlers.example.com:8443":         false,
		"grpcs://handlers.example.com":             false,
		"grpcs://bare.example.org":                 true,
		"grpc://bare.example.org:9000":             true,
		"grpc://127.0.0.2:" + port:                 false,
		"http://127.0.0.1:" + port:                 false,
		"grpc://user:pw@127.0.0.1:" + port:         false,
		"grpc://127.0.0.1:" + port + "/rdq.v1.X/Y": false,
		"grpc://127.0.0.1:" + port + "?token=x":    false,
		"127.0.0.1:" + port:                        false,
	} {
		err := c.Check(target)
		if (err == nil) != ok {
			t.Errorf("Check(%q) = %v, want allowed %v", target, err, ok)
		}
		if err != nil && !errors.Is(err, rdq.ErrInvalid) {
			t.Errorf("Check(%q) = %v, does not wrap rdq.ErrInvalid", target, err)
		}
	}
	if err := c.Check("grpc://127.0.0.2:" + port); !errors.Is(err, callback.ErrNotAllowed) {
		t.Errorf("off the allowlist: err = %v, want callback.ErrNotAllowed", err)
	}
	if _, err := c.Router(map[string]Target{"orders": {URL: "grpc://10.0.0.1:1"}}); !errors.Is(err, callback.ErrNotAllowed) {
		t.Errorf("Router: err = %v, want callback.ErrNotAllowed", err)
	}

	// Checked again at call time.
	wide := newCaller(t, Config{})
	call := mustHandler(t, wide, Target{URL: "grpc://" + addr})
	wide.allow = c.allow[:1]
	if err := call(context.Background(), testTask()); !errors.Is(err, callback.ErrNotAllowed) || !rdq.IsPermanent(err) {
		t.Errorf("call off the allowlist: err = %v, want a permanent ErrNotAllowed", err)
	}

	// Loopback is refused when dialled unless AllowAddrs lists it, by
	// address and by a name resolving to it.
	strict := newCaller(t, Config{Allow: []string{"127.0.0.1", "localhost"}, AllowAddrs: []string{"10.0.0.0/8"}})
	for _, target := range []string{"grpc://" + addr, "grpc://localhost:" + port} {
		err := mustHandler(t, strict, Target{URL: target})(context.Background(), testTask())
		if !errors.Is(err, callback.ErrNotAllowed) || !rdq.IsPermanent(err) {
			t.Errorf("%s: err = %v, want a permanent ErrNotAllowed", target, err)
		}
	}
	if n := h.count(); n != 0 {
		t.Errorf("the handler was reached %d times", n)
	}
	if _, err := New(Config{}); !errors.Is(err, rdq.ErrInvalid) {
		t.Errorf("empty allowlist: err = %v", err)
	}
	if _, err := New(Config{Allow: []string{"ftp://x"}}); !errors.Is(err, rdq.ErrInvalid) {
		t.Errorf("bad entry: err = %v", err)
	}
}

func TestRouterDispatchesByQueue(t *testing.T) {
	orders, mails := &handler{answer: answer(success)}, &handler{answer: answer(success)}
	ao, am := serveHandler(t, orders), serveHandler(t, mails)
	c := newCaller(t, Config{})
	route, err := c.Router(map[string]Target{"orders": {URL: "grpc://" + ao}, "mails": {URL: "grpc://" + am}})
	if err != nil {
		t.Fatal(err)
	}
	task := testTask()
	if err := route(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	task.Queue = "mails"
	if err := route(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	task.Queue = "unknown"
	if err := route(context.Background(), task); !rdq.IsPermanent(err) {
		t.Errorf("queue without a target: err = %v, want permanent", err)
	}
	if orders.count() != 1 || mails.count() != 1 {
		t.Errorf("calls: orders %d, mails %d", orders.count(), mails.count())
	}
}

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		in    string
		limit int
		want  string
	}{
		{"short", 10, "short"},
		{"ééé", 3, "é…[truncated]"},
		{"ab\xffc", 10, "ab\uFFFDc"},
		{"  padded  ", 20, "padded"},
	} {
		if got := clip(tc.in, tc.limit); got != tc.want {
			t.Errorf("clip(%q, %d) = %q, want %q", tc.in, tc.limit, got, tc.want)
		}
	}
}

// An answer larger than MaxAnswerBytes is refused, not read: the attempt
// fails as grpc_resource_exhausted with a short message.
func TestHugeAnswerIsRefused(t *testing.T) {
	h := &handler{}
	addr := serveHandler(t, h)
	c := newCaller(t, Config{})
	call := mustHandler(t, c, Target{URL: "grpc://" + addr})
	h.answer = answer(&rdqv1.ExecuteResponse{Outcome: &rdqv1.ExecuteResponse_Retryable{Retryable: &rdqv1.Failure{
		ErrorType: "Boom", Message: "big", Stack: strings.Repeat("s", 3<<20), // under grpc-go's default limit of 4 MiB
	}}})
	err := call(context.Background(), testTask())
	var se *StatusError
	if !errors.As(err, &se) || se.Code != codes.ResourceExhausted {
		t.Fatalf("a 3 MiB answer: %v, want a resource_exhausted status", err)
	}
	f := rdq.Describe(err)
	if f.Type != "grpc_resource_exhausted" || len(f.Message)+len(f.Stack) > rdq.MaxMessageBytes+rdq.MaxStackBytes {
		t.Errorf("a 3 MiB answer recorded as %s, %d bytes of message, %d of stack", f.Type, len(f.Message), len(f.Stack))
	}
}

// A refused dial is reported as such only while it is the latest: once the
// address check lets a dial through, a handler that does not answer fails
// the attempt retryably, as Unavailable, not as the old refusal.
func TestRefusalDoesNotOutliveTheNextDial(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	if err := lis.Close(); err != nil { // nothing listens there now
		t.Fatal(err)
	}
	c := newCaller(t, Config{})
	var refuse atomic.Bool
	refuse.Store(true)
	guard := c.control
	c.control = func(network, address string, rc syscall.RawConn) error {
		if refuse.Load() {
			return fmt.Errorf("%w: refused by the test", callback.ErrNotAllowed)
		}
		return guard(network, address, rc)
	}
	call := mustHandler(t, c, Target{URL: "grpc://" + addr})
	if err := call(context.Background(), testTask()); !errors.Is(err, callback.ErrNotAllowed) || !rdq.IsPermanent(err) {
		t.Fatalf("refused dial: err = %v, want a permanent ErrNotAllowed", err)
	}
	refuse.Store(false)
	// The connection dials again by itself, after a backoff of at most
	// a few seconds; until it has, the refusal is still the latest.
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := call(context.Background(), testTask())
		if !errors.Is(err, callback.ErrNotAllowed) {
			var se *StatusError
			if !errors.As(err, &se) || se.Code != codes.Unavailable || rdq.IsPermanent(err) {
				t.Fatalf("dial allowed, nothing listening: err = %v, want a retryable Unavailable StatusError", err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("15 s after the address check allows the dial, the call still fails with the old refusal: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}
