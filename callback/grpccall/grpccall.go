// Package grpccall runs rdq tasks on gRPC handlers: a queue's handler is a
// remote endpoint implementing rdq.v1.HandlerService (proto/rdq/v1/
// handler.proto), and the worker calls its Execute once per attempt. It is
// the gRPC form of an HTTP callback (package callback), with the same
// target rules and the same path through retries and the dead-letter
// queue.
//
// A Caller builds handlers (func(context.Context, *rdq.Task) error, which a
// worker registers like any in-process handler). Each execution is one
// Execute call carrying the task's identity (id, queue, handler, attempt,
// life, lease token), content type, headers and payload, with:
//
//	deadline       the attempt's: Config.Timeout, or the worker's handler timeout if shorter
//	traceparent    W3C trace context of the attempt (and tracestate), as call metadata
//	metadata       the target's own (Target.Metadata), such as "authorization: Bearer ..."
//
// A target is a URL: grpcs://host[:port] for TLS (port 443 by default;
// Config.TLS or Target.TLS give the trusted roots and, for mutual TLS, the
// client certificate) or grpc://host[:port] for plaintext HTTP/2 (port 80
// by default), without path or query.
//
// The answer decides the attempt: success succeeds; retryable is a failure
// retried by the queue's policy, permanent sends the task to the
// dead-letter queue at once, and retry_after is retryable no earlier than
// its delay (capped by Config.MaxRetryAfter); the failure's error type,
// message and stack are recorded as the handler gave them
// (rdq.RemoteError), cleaned and capped, a reserved type prefixed
// ("cancelled" is recorded "remote_cancelled"; see
// rdq.IsReservedErrorType). A response with no outcome is a
// retryable failure of type "grpc_no_outcome". A gRPC error status is a
// retryable failure of type "grpc_" + the status name in lower case
// ("grpc_unavailable"), except INVALID_ARGUMENT, FAILED_PRECONDITION,
// UNIMPLEMENTED, PERMISSION_DENIED and UNAUTHENTICATED, which are
// permanent; its message keeps the start of the status message. A call
// that outlives Config.Timeout fails like a handler timeout
// (rdq.TimeoutError). A handler process that dies mid-call is a retryable
// failure ("grpc_unavailable") like any other.
//
// Targets are guarded as HTTP callbacks are, by the same allowlist entries
// (a bare host admits it over grpc and grpcs too; a URL prefix such as
// "grpcs://handlers.internal:8443" admits that scheme, host and port) when
// a target is registered and when it is called, and by a check of every
// connection when it is dialled, against the address the name resolved
// to: loopback, link-local, private, unspecified and multicast addresses
// are refused unless Config.AllowAddrs lists them. A refused target is a
// permanent failure wrapping callback.ErrNotAllowed.
package grpccall

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/callback/internal/netguard"
	"github.com/srjn45/rdq/proto/rdqv1"
)

// Defaults of a Config.
const (
	// DefaultTimeout bounds one call when Config.Timeout is zero.
	DefaultTimeout = 30 * time.Second
	// DefaultMaxRetryAfter caps a retry_after delay when
	// Config.MaxRetryAfter is zero.
	DefaultMaxRetryAfter = time.Hour
	// DefaultMaxStatusMessage is how much of an error status's message is
	// kept in the attempt's error when Config.MaxStatusMessage is zero.
	DefaultMaxStatusMessage = 1 << 10
)

// Schemes of a target URL.
const (
	SchemeTLS       = "grpcs"
	SchemePlaintext = "grpc"
)

var errInvalidConfig = fmt.Errorf("%w: grpccall", rdq.ErrInvalid)

// Config configures a Caller.
type Config struct {
	// Allow lists the permitted targets, in the entries callback.Config
	// takes; at least one. A bare host ("handlers.internal",
	// "127.0.0.1:9000") admits that host over grpc and grpcs; a URL
	// prefix admits its scheme, host and port.
	Allow []string
	// AllowAddrs lists the addresses ("127.0.0.1", "::1") and CIDR
	// prefixes ("10.1.0.0/16") calls may connect to although they are
	// loopback, link-local, private, unspecified or multicast; every other
	// address in those ranges is refused when it is dialled. Empty means
	// public addresses only.
	AllowAddrs []string
	// Timeout bounds one call; zero means DefaultTimeout. The worker's own
	// handler timeout, if shorter, ends it earlier.
	Timeout time.Duration
	// MaxRetryAfter caps the delay a retry_after answer may ask for; zero
	// means DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration
	// MaxStatusMessage is how many bytes of an error status's message are
	// kept in the attempt's error; zero means DefaultMaxStatusMessage.
	MaxStatusMessage int
	// TLS configures the connections to grpcs targets that have no
	// Target.TLS: RootCAs (nil means the system's roots) and, for mutual
	// TLS, Certificates or GetClientCertificate. It is cloned; the server
	// name is the target's host unless ServerName is set. Nil means the
	// system's roots and no client certificate.
	TLS *tls.Config
	// Propagator writes the trace context of the attempt into the call's
	// metadata; nil means W3C trace context (traceparent, tracestate).
	// When the attempt's context carries no span, the trace context of
	// the task's own headers is sent.
	Propagator propagation.TextMapPropagator
	// UserAgent prefixes the user-agent of every call; empty means
	// "rdq-grpccall".
	UserAgent string
}

// Target is a gRPC handler endpoint.
type Target struct {
	// URL is grpcs://host[:port] or grpc://host[:port], admitted by the
	// allowlist.
	URL string
	// Metadata is sent with every call to URL, for instance
	// {"authorization": "Bearer ..."}: keys in lower case letters, digits
	// and "-_.", not starting with "grpc-" and not one the caller sets
	// (traceparent, tracestate, user-agent, content-type, te); values of
	// printable ASCII. Send credentials over grpcs only.
	Metadata map[string]string
	// TLS replaces Config.TLS for this target (a grpcs URL), for instance
	// to present another client certificate.
	TLS *tls.Config
}

// Caller makes handlers that run tasks on gRPC handlers. It is safe for
// concurrent use. Each registered target has its own connection, made at
// the first call and kept; Close closes them.
type Caller struct {
	allow netguard.Allowlist
	guard *netguard.DialGuard
	// control checks each dialled address: guard.Control.
	control          func(network, address string, rc syscall.RawConn) error
	tls              *tls.Config
	timeout          time.Duration
	maxRetryAfter    time.Duration
	maxStatusMessage int
	propagator       propagation.TextMapPropagator
	userAgent        string

	mu     sync.Mutex
	conns  []*grpc.ClientConn
	closed bool
}

// New returns a Caller for cfg, or an error wrapping rdq.ErrInvalid that
// names the problem.
func New(cfg Config) (*Caller, error) {
	if len(cfg.Allow) == 0 {
		return nil, fmt.Errorf("%w: the allowlist is empty; list the hosts or URL prefixes gRPC handlers may be reached at", errInvalidConfig)
	}
	if cfg.Timeout < 0 || cfg.MaxRetryAfter < 0 || cfg.MaxStatusMessage < 0 {
		return nil, fmt.Errorf("%w: Timeout, MaxRetryAfter and MaxStatusMessage must not be negative", errInvalidConfig)
	}
	allow, err := netguard.NewAllowlist(cfg.Allow)
	if err != nil {
		return nil, err
	}
	guard, err := netguard.NewDialGuard(cfg.AllowAddrs)
	if err != nil {
		return nil, err
	}
	c := &Caller{
		allow:            allow,
		guard:            guard,
		control:          guard.Control,
		tls:              cfg.TLS,
		timeout:          cmpOr(cfg.Timeout, DefaultTimeout),
		maxRetryAfter:    cmpOr(cfg.MaxRetryAfter, DefaultMaxRetryAfter),
		maxStatusMessage: cmpOr(cfg.MaxStatusMessage, DefaultMaxStatusMessage),
		propagator:       cfg.Propagator,
		userAgent:        cfg.UserAgent,
	}
	if c.propagator == nil {
		c.propagator = propagation.TraceContext{}
	}
	if c.userAgent == "" {
		c.userAgent = "rdq-grpccall"
	}
	return c, nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Close closes the connections of every handler the Caller made; calls
// made after it fail. Close it after the worker running them has stopped.
func (c *Caller) Close() error {
	c.mu.Lock()
	conns := c.conns
	c.conns, c.closed = nil, true
	c.mu.Unlock()
	var errs []error
	for _, cc := range conns {
		if err := cc.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Check reports whether target is an acceptable handler URL: grpc or
// grpcs, with a host, without credentials, path, query or fragment, and
// admitted by the allowlist. Its error wraps callback.ErrNotAllowed (and
// rdq.ErrInvalid) when the allowlist refuses the target.
func (c *Caller) Check(target string) error {
	_, err := c.parseTarget(target)
	return err
}

func (c *Caller) parseTarget(target string) (*url.URL, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("%w: %w: %q is not a URL", rdq.ErrInvalid, netguard.ErrNotAllowed, target)
	}
	if err := c.allow.Check(u, SchemeTLS, SchemePlaintext); err != nil {
		return nil, fmt.Errorf("%w: %w", rdq.ErrInvalid, err)
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Opaque != "" {
		return nil, fmt.Errorf("%w: %s: a gRPC handler is addressed as grpcs://host:port (or grpc://), without path or query", errInvalidConfig, netguard.Redact(u))
	}
	u.Path, u.RawPath = "", ""
	return u, nil
}

// endpoint is a registered target: checked URL, metadata and connection.
type endpoint struct {
	url    *url.URL
	name   string // the URL, for messages
	md     metadata.MD
	client rdqv1.HandlerServiceClient
	// refused holds the error of the latest dial when the address check
	// refused it, nil when that dial was allowed (connected or not): an
	// Unavailable status then means that refusal.
	refused atomic.Pointer[error]
}

func (c *Caller) endpoint(t Target) (*endpoint, error) {
	u, err := c.parseTarget(t.URL)
	if err != nil {
		return nil, err
	}
	ep := &endpoint{url: u, name: netguard.Redact(u), md: metadata.MD{}}
	for k, v := range t.Metadata {
		if err := checkMetadata(k, v); err != nil {
			return nil, fmt.Errorf("%w: target %s: %w", errInvalidConfig, ep.name, err)
		}
		ep.md.Set(k, v)
	}
	creds := insecure.NewCredentials()
	if u.Scheme == SchemeTLS {
		cfg := t.TLS
		if cfg == nil {
			cfg = c.tls
		}
		if cfg == nil {
			cfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		creds = credentials.NewTLS(cfg.Clone())
	} else if t.TLS != nil {
		return nil, fmt.Errorf("%w: target %s: TLS is set for a plaintext target: use grpcs://", errInvalidConfig, ep.name)
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == SchemeTLS {
			port = "443"
		}
	}
	addr := net.JoinHostPort(u.Hostname(), port)
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: c.control}
	cc, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(creds),
		grpc.WithUserAgent(c.userAgent),
		// An answer holds at most a failure's type, message and stack at
		// their caps: anything larger is refused before it is read.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxAnswerBytes)),
		grpc.WithMaxHeaderListSize(64<<10),
		// The name is resolved when it is dialled, here, so that the
		// address check sees the address connected to.
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			conn, err := dialer.DialContext(ctx, "tcp", a)
			// Every dial replaces the record: a handler refused once and
			// down since (connection refused, say) fails retryably.
			if errors.Is(err, netguard.ErrNotAllowed) {
				ep.refused.Store(&err)
			} else {
				ep.refused.Store(nil)
			}
			return conn, err
		}),
		// A handler that went away is dialled again soon: attempts are
		// spaced by the queue's policy, not by long reconnection backoff.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second},
			MinConnectTimeout: 10 * time.Second,
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("%w: target %s: %w", errInvalidConfig, ep.name, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.Join(errors.New("grpccall: the caller is closed"), cc.Close())
	}
	c.conns = append(c.conns, cc)
	ep.client = rdqv1.NewHandlerServiceClient(cc)
	return ep, nil
}

// ValidateMetadata reports whether md is acceptable as Target.Metadata
// (see there); its error wraps rdq.ErrInvalid and names the first bad
// entry, in key order.
func ValidateMetadata(md map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(md)) {
		if err := checkMetadata(k, md[k]); err != nil {
			return fmt.Errorf("%w: %w", errInvalidConfig, err)
		}
	}
	return nil
}

// Metadata keys the caller sets itself.
var reservedKeys = map[string]bool{
	"traceparent": true, "tracestate": true, "user-agent": true, "content-type": true, "te": true, "host": true,
}

// checkMetadata validates one entry of Target.Metadata.
func checkMetadata(k, v string) error {
	if k == "" {
		return errors.New("a metadata key is empty")
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("metadata key %q: use lower case letters, digits and - _ . only", k)
		}
	}
	if strings.HasPrefix(k, "grpc-") || reservedKeys[k] || strings.HasSuffix(k, "-bin") {
		return fmt.Errorf("metadata key %q is reserved or binary: choose another name", k)
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("the value of metadata key %q holds a byte (0x%02x) that is not printable ASCII", k, c)
		}
	}
	return nil
}

// Handler returns a handler that runs each task on target. target is
// checked against the allowlist now, and again at every call.
func (c *Caller) Handler(target Target) (func(context.Context, *rdq.Task) error, error) {
	ep, err := c.endpoint(target)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, t *rdq.Task) error { return c.call(ctx, ep, t) }, nil
}

// Router returns one handler that runs each task on the target of its
// queue, from targets (queue name → target), every one checked now against
// the allowlist. A task of a queue without a target fails permanently.
func (c *Caller) Router(targets map[string]Target) (func(context.Context, *rdq.Task) error, error) {
	eps := make(map[string]*endpoint, len(targets))
	for queue, target := range targets {
		if err := rdq.ValidateName("queue", queue); err != nil {
			return nil, err
		}
		ep, err := c.endpoint(target)
		if err != nil {
			return nil, fmt.Errorf("queue %s: %w", queue, err)
		}
		eps[queue] = ep
	}
	return func(ctx context.Context, t *rdq.Task) error {
		ep, ok := eps[t.Queue]
		if !ok {
			return rdq.Permanent(fmt.Errorf("grpccall: no gRPC handler for queue %q", t.Queue))
		}
		return c.call(ctx, ep, t)
	}, nil
}

// StatusError is a call that ended with a gRPC error status. Its error
// type is "grpc_" and the status name in lower case, such as
// "grpc_unavailable".
type StatusError struct {
	// Target is the handler's URL.
	Target string
	// Code is the status code.
	Code codes.Code
	// Message is the start of the status message, valid UTF-8, at most
	// Config.MaxStatusMessage bytes plus a truncation mark.
	Message string
}

// Error names the target, the status and its message.
func (e *StatusError) Error() string {
	s := fmt.Sprintf("grpc handler %s: %s", e.Target, codeName(e.Code))
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// ErrorType is "grpc_" and the status name in lower case.
func (e *StatusError) ErrorType() string { return "grpc_" + strings.ToLower(codeName(e.Code)) }

// codeName is the canonical name of code, such as "UNAVAILABLE".
func codeName(code codes.Code) string {
	if n, ok := codeNames[code]; ok {
		return n
	}
	return fmt.Sprintf("CODE_%d", uint32(code))
}

var codeNames = map[codes.Code]string{
	codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN", codes.InvalidArgument: "INVALID_ARGUMENT",
	codes.DeadlineExceeded: "DEADLINE_EXCEEDED", codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
	codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED", codes.OutOfRange: "OUT_OF_RANGE",
	codes.Unimplemented: "UNIMPLEMENTED", codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE",
	codes.DataLoss: "DATA_LOSS", codes.Unauthenticated: "UNAUTHENTICATED",
}

// Permanent reports whether a call ending with status code fails the task
// for good: INVALID_ARGUMENT, FAILED_PRECONDITION, UNIMPLEMENTED,
// PERMISSION_DENIED and UNAUTHENTICATED do; every other status is retried.
func Permanent(code codes.Code) bool {
	switch code {
	case codes.InvalidArgument, codes.FailedPrecondition, codes.Unimplemented, codes.PermissionDenied, codes.Unauthenticated:
		return true
	}
	return false
}

// NoOutcomeError is an answer that set no outcome. It is retryable; its
// error type is "grpc_no_outcome".
type NoOutcomeError struct {
	// Target is the handler's URL.
	Target string
}

// Error names the target.
func (e *NoOutcomeError) Error() string {
	return fmt.Sprintf("grpc handler %s: the answer has no outcome (set success, retryable, permanent or retry_after)", e.Target)
}

// ErrorType is "grpc_no_outcome".
func (e *NoOutcomeError) ErrorType() string { return "grpc_no_outcome" }

func (c *Caller) call(ctx context.Context, ep *endpoint, t *rdq.Task) error {
	if err := c.allow.Check(ep.url, SchemeTLS, SchemePlaintext); err != nil {
		return rdq.Permanent(err)
	}
	callCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	md := ep.md.Copy()
	carrier := mdCarrier(md)
	c.propagator.Inject(ctx, carrier)
	if len(md.Get("traceparent")) == 0 {
		// No span in the attempt's context: the task's own trace
		// context, if its headers hold a valid one.
		c.propagator.Inject(c.propagator.Extract(context.Background(), propagation.MapCarrier(t.Headers)), carrier)
	}
	req := &rdqv1.ExecuteRequest{
		Id:          t.ID.String(),
		Queue:       t.Queue,
		Handler:     t.Handler,
		Attempt:     int32(t.NextAttempt()),
		Life:        int32(t.Life),
		LeaseToken:  t.LeaseToken,
		ContentType: t.ContentType,
		Headers:     t.Headers,
		Payload:     t.Payload,
	}
	resp, err := ep.client.Execute(metadata.NewOutgoingContext(callCtx, md), req)
	if err != nil {
		return c.failure(ctx, callCtx, ep, err)
	}
	switch o := resp.GetOutcome().(type) {
	case *rdqv1.ExecuteResponse_Success:
		return nil
	case *rdqv1.ExecuteResponse_Retryable:
		return remote(o.Retryable)
	case *rdqv1.ExecuteResponse_Permanent:
		return rdq.Permanent(remote(o.Permanent))
	case *rdqv1.ExecuteResponse_RetryAfter:
		d := c.maxRetryAfter
		if ms := o.RetryAfter.GetDelayMs(); ms < d.Milliseconds() {
			d = time.Duration(max(ms, 0)) * time.Millisecond
		}
		return rdq.RetryAfter(d, remote(o.RetryAfter.GetFailure()))
	}
	return &NoOutcomeError{Target: ep.name}
}

// failure classifies the error of a call that got no answer.
func (c *Caller) failure(ctx, callCtx context.Context, ep *endpoint, err error) error {
	if status.Code(err) == codes.DeadlineExceeded {
		// The handler's side may end the call at the deadline (sent with
		// the call) a moment before this side's timer fires: once the
		// deadline has passed, the call's context ends at once.
		if dl, ok := callCtx.Deadline(); ok && !time.Now().Before(dl) {
			<-callCtx.Done()
		}
	}
	switch {
	case ctx.Err() != nil:
		// The worker's context ended: its timeout or shutdown.
		return fmt.Errorf("grpc handler %s: %w", ep.name, context.Cause(ctx))
	case callCtx.Err() != nil:
		return fmt.Errorf("grpc handler %s: %w", ep.name, &rdq.TimeoutError{After: c.timeout})
	}
	st := status.Convert(err)
	if st.Code() == codes.Unavailable {
		if refused := ep.refused.Load(); refused != nil {
			return rdq.Permanent(fmt.Errorf("grpc handler %s: %w", ep.name, *refused))
		}
	}
	se := &StatusError{Target: ep.name, Code: st.Code(), Message: clip(st.Message(), c.maxStatusMessage)}
	if Permanent(st.Code()) {
		return rdq.Permanent(se)
	}
	return se
}

// remote is the failure a handler answered with.
func remote(f *rdqv1.Failure) *rdq.RemoteError {
	return &rdq.RemoteError{
		Type:    clip(f.GetErrorType(), rdq.MaxErrorTypeLength),
		Message: clip(f.GetMessage(), rdq.MaxMessageBytes),
		Stack:   clip(f.GetStack(), rdq.MaxStackBytes),
	}
}

// MaxAnswerBytes is the largest answer of a handler's Execute a Caller
// reads, in bytes: a failure's type, message and stack at their caps
// (rdq.MaxErrorTypeLength, rdq.MaxMessageBytes, rdq.MaxStackBytes), and
// room for the encoding. A larger answer fails the attempt as
// grpc_resource_exhausted.
const MaxAnswerBytes = rdq.MaxErrorTypeLength + rdq.MaxMessageBytes + rdq.MaxStackBytes + 16<<10

// clip keeps the start of s as valid UTF-8, at most limit bytes, marking a
// truncation.
func clip(s string, limit int) string {
	more := len(s) > limit
	if more {
		// Cut before a rune the limit would split.
		cut := limit
		for i := 0; i < utf8.UTFMax && cut > 0 && !utf8.RuneStart(s[cut]); i++ {
			cut--
		}
		s = s[:cut]
	}
	s = strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
	if more {
		s += "…[truncated]"
	}
	return s
}

// mdCarrier writes trace context into gRPC metadata.
type mdCarrier metadata.MD

func (m mdCarrier) Get(k string) string {
	if v := metadata.MD(m).Get(k); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (m mdCarrier) Set(k, v string) { metadata.MD(m).Set(k, v) }

func (m mdCarrier) Keys() []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
