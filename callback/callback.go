// Package callback runs rdq tasks as HTTP callbacks: a queue's handler is a
// remote endpoint that the worker POSTs each task to.
//
// A Caller builds handlers (func(context.Context, *rdq.Task) error, which a
// worker registers like any in-process handler). Each execution is one POST
// to the target's URL of a JSON Message (Content-Type application/json)
// holding the task's identity (id, queue, handler, attempt, life, lease
// token), content type, headers and payload, signed by the Standard
// Webhooks scheme (https://www.standardwebhooks.com) with the target's
// secret:
//
//	webhook-id          the task's UUID (the same for every attempt)
//	webhook-timestamp   Unix time in seconds when the request was signed
//	webhook-signature   "v1," + base64 HMAC-SHA256(key, id + "." + timestamp + "." + body)
//	traceparent         W3C trace context of the attempt (and tracestate)
//
// Everything a receiver may act on is in the signed body; a receiver
// checks it with Verify or VerifyHandler here, or with any Standard
// Webhooks library in another language. Each target may have its own
// secret, so a request seen by one receiver is refused by every other.
//
// The response decides the attempt: 2xx is success; 408, 429 and 5xx are
// retryable failures, honouring a Retry-After header (rdq.RetryAfter); other
// statuses, 3xx included, are permanent failures (rdq.Permanent) that send
// the task to the dead-letter queue at once. Transport errors are retryable,
// and a call that outlives Config.Timeout fails like a handler timeout
// (rdq.TimeoutError). A request that cannot be built is a permanent
// failure.
//
// A failed response tells why in its body. A receiver that answers the
// structured failure body (FailureContentType, versioned JSON with the
// handler's error type, message and stack; the receivers of this package
// and of rdq's TypeScript and Python SDKs do) has the attempt recorded as
// an rdq.RemoteError with those, as a gRPC handler's failure is; the
// status still decides whether it is retried. Any other body is kept as
// its start, after the status, in a StatusError of type "http_" and the
// status code.
//
// Targets are guarded twice. A target URL's path is cleaned of dot
// segments (percent-encoded ones included) and must be admitted by the
// allowlist, when it is registered and when it is called; the cleaned URL
// is what is sent. And every connection is checked when it is dialled,
// against the address the name resolved to: loopback, link-local, private,
// unspecified and multicast addresses are refused unless Config.AllowAddrs
// lists them, so an allowed name that resolves (or is rebound) to an
// internal address reaches nothing. Redirects are never followed.
package callback

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/propagation"

	"github.com/srjn45/rdq"
)

// The headers of a callback request, as Standard Webhooks names them.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// Defaults of a Config.
const (
	// DefaultTimeout bounds one callback when Config.Timeout is zero.
	DefaultTimeout = 30 * time.Second
	// DefaultMaxErrorBody is how much of a failed response's body is kept
	// in the attempt's error message when Config.MaxErrorBody is zero.
	DefaultMaxErrorBody = 1 << 10
	// DefaultMaxRetryAfter caps a receiver's Retry-After when
	// Config.MaxRetryAfter is zero.
	DefaultMaxRetryAfter = time.Hour
	// MinSecretLength is the shortest accepted signing secret, in bytes.
	MinSecretLength = 16
)

var errInvalidConfig = fmt.Errorf("%w: callback", rdq.ErrInvalid)

// Config configures a Caller.
type Config struct {
	// Secret signs the requests of every target that has no secret of its
	// own (see Sign): at least MinSecretLength bytes, either raw or in the
	// Standard Webhooks form "whsec_" + base64 of the key. Required unless
	// every target passed to Handler and Router has its own.
	Secret []byte
	// Allow lists the permitted targets; at least one entry. An entry is
	// a URL prefix ("https://hooks.example.com/rdq/": that scheme, host,
	// port and path prefix, matched at a path-segment boundary unless the
	// prefix ends in "/") or a bare host ("hooks.internal" for any port
	// over http or https, "127.0.0.1:9000" for that port only).
	Allow []string
	// AllowAddrs lists the addresses ("127.0.0.1", "::1") and CIDR
	// prefixes ("10.1.0.0/16") callbacks may connect to although they are
	// loopback, link-local, private, unspecified or multicast; every other
	// address in those ranges is refused when it is dialled. Empty means
	// public addresses only.
	AllowAddrs []string
	// Timeout bounds one callback, response body included; zero means
	// DefaultTimeout. The worker's own handler timeout, if shorter, ends
	// it earlier.
	Timeout time.Duration
	// MaxErrorBody is how many bytes of a failed response's body are kept
	// in the error; zero means DefaultMaxErrorBody.
	MaxErrorBody int
	// MaxRetryAfter caps the delay a Retry-After header may ask for; zero
	// means DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration
	// Transport sends the requests; nil means a clone of
	// http.DefaultTransport without proxy whose dialer refuses the
	// addresses AllowAddrs does not list. A Transport given here does its
	// own dialling: the allowlist is enforced in front of it, the address
	// checks are not.
	Transport http.RoundTripper
	// Propagator writes the trace context of the attempt into the request;
	// nil means W3C trace context (traceparent, tracestate). When the
	// attempt's context carries no span, the task's own traceparent and
	// tracestate headers are sent.
	Propagator propagation.TextMapPropagator
	// UserAgent is sent with every request; empty means "rdq-callback".
	UserAgent string
}

// Target is a callback endpoint.
type Target struct {
	// URL is where tasks are POSTed: absolute http or https, admitted by
	// the allowlist.
	URL string
	// Secret signs the requests to URL, in the forms Config.Secret
	// accepts; nil means Config.Secret. Give each receiver its own secret,
	// so that no receiver can pass off a request it was sent as one for
	// another.
	Secret []byte
}

// Caller makes handlers that run tasks as HTTP callbacks. It is safe for
// concurrent use. Close it to release idle connections.
type Caller struct {
	secret        []byte // the key of Config.Secret; nil if none
	allow         allowlist
	client        *http.Client
	transport     http.RoundTripper
	timeout       time.Duration
	maxErrorBody  int
	maxRetryAfter time.Duration
	propagator    propagation.TextMapPropagator
	userAgent     string
}

// New returns a Caller for cfg, or an error wrapping rdq.ErrInvalid that
// names the problem.
func New(cfg Config) (*Caller, error) {
	var key []byte
	if cfg.Secret != nil {
		var err error
		if key, err = checkSecret(cfg.Secret); err != nil {
			return nil, err
		}
	}
	if len(cfg.Allow) == 0 {
		return nil, fmt.Errorf("%w: the allowlist is empty; list the hosts or URL prefixes callbacks may target", errInvalidConfig)
	}
	if cfg.Timeout < 0 || cfg.MaxErrorBody < 0 || cfg.MaxRetryAfter < 0 {
		return nil, fmt.Errorf("%w: Timeout, MaxErrorBody and MaxRetryAfter must not be negative", errInvalidConfig)
	}
	allow, err := newAllowlist(cfg.Allow)
	if err != nil {
		return nil, err
	}
	guard, err := newDialGuard(cfg.AllowAddrs)
	if err != nil {
		return nil, err
	}
	c := &Caller{
		secret:        key,
		allow:         allow,
		timeout:       cfg.Timeout,
		maxErrorBody:  cfg.MaxErrorBody,
		maxRetryAfter: cfg.MaxRetryAfter,
		propagator:    cfg.Propagator,
		userAgent:     cfg.UserAgent,
		transport:     cfg.Transport,
	}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	if c.maxErrorBody == 0 {
		c.maxErrorBody = DefaultMaxErrorBody
	}
	if c.maxRetryAfter == 0 {
		c.maxRetryAfter = DefaultMaxRetryAfter
	}
	if c.propagator == nil {
		c.propagator = propagation.TraceContext{}
	}
	if c.userAgent == "" {
		c.userAgent = "rdq-callback"
	}
	if c.transport == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		// A proxy would dial (and resolve) for us, out of reach of the
		// address checks.
		tr.Proxy = nil
		dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: guard.control}
		tr.DialContext = dialer.DialContext
		c.transport = tr
	}
	c.client = &http.Client{
		Transport: &allowTransport{allow: allow, next: c.transport},
		// Never follow a redirect: the 3xx response is the result.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c, nil
}

// ValidateSecret reports whether secret is an acceptable signing secret
// (see Config.Secret): raw, or "whsec_" followed by standard base64, with
// a key of at least MinSecretLength bytes that is not a run of a few
// repeated byte values ("aaaa…", "abababab…"). Its error wraps
// rdq.ErrInvalid and says what is wrong.
func ValidateSecret(secret []byte) error {
	_, err := checkSecret(secret)
	return err
}

// checkSecret returns the signing key of secret, or an error wrapping
// rdq.ErrInvalid if it is malformed or shorter than MinSecretLength.
func checkSecret(secret []byte) ([]byte, error) {
	key, err := signingKey(secret)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errInvalidConfig, err)
	}
	if len(key) < MinSecretLength {
		return nil, fmt.Errorf("%w: the signing secret is %d bytes; use at least %d random bytes", errInvalidConfig, len(key), MinSecretLength)
	}
	if n := distinctBytes(key); n < minSecretDistinctBytes {
		return nil, fmt.Errorf("%w: the signing secret has only %d distinct byte values in %d bytes, a pattern anyone can guess; use at least %d random bytes (openssl rand -base64 32)",
			errInvalidConfig, n, len(key), MinSecretLength)
	}
	return key, nil
}

// minSecretDistinctBytes is the fewest distinct byte values a signing key
// may have: one of MinSecretLength random bytes has fewer with a
// probability far below one in 10^9, while a secret typed as a run of one
// character ("aaaa…") or of a short pattern has at most a handful.
const minSecretDistinctBytes = 8

// distinctBytes counts the distinct byte values of b.
func distinctBytes(b []byte) int {
	var seen [256]bool
	n := 0
	for _, c := range b {
		if !seen[c] {
			seen[c] = true
			n++
		}
	}
	return n
}

// Close releases the idle connections of the Caller's transport (when it
// has a CloseIdleConnections method). Handlers stay usable.
func (c *Caller) Close() {
	if ci, ok := c.transport.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// Check reports whether target is an acceptable callback URL: absolute
// http or https, without credentials or fragment, and, once its path is
// cleaned of dot segments, admitted by the allowlist. Its error wraps
// ErrNotAllowed (and rdq.ErrInvalid).
func (c *Caller) Check(target string) error {
	_, err := c.parseTarget(target)
	return err
}

// parseTarget parses target and cleans its path, then checks the result
// against the allowlist. The cleaned URL is the one to send to.
func (c *Caller) parseTarget(target string) (*url.URL, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("%w: %w: %q is not a URL", rdq.ErrInvalid, ErrNotAllowed, target)
	}
	if u, err = cleanURL(u); err != nil {
		return nil, fmt.Errorf("%w: %w", rdq.ErrInvalid, err)
	}
	if err := c.allow.check(u); err != nil {
		return nil, fmt.Errorf("%w: %w", rdq.ErrInvalid, err)
	}
	return u, nil
}

// endpoint is a checked target: cleaned URL and signing key.
type endpoint struct {
	url *url.URL
	key []byte
}

func (c *Caller) endpoint(t Target) (endpoint, error) {
	u, err := c.parseTarget(t.URL)
	if err != nil {
		return endpoint{}, err
	}
	key := c.secret
	if t.Secret != nil {
		if key, err = checkSecret(t.Secret); err != nil {
			return endpoint{}, fmt.Errorf("target %s: %w", redact(u), err)
		}
	}
	if key == nil {
		return endpoint{}, fmt.Errorf("%w: target %s has no secret and Config.Secret is not set", errInvalidConfig, redact(u))
	}
	return endpoint{url: u, key: key}, nil
}

// Handler returns a handler that POSTs each task to target, signed with
// its secret. target is checked against the allowlist now, and again at
// every call.
func (c *Caller) Handler(target Target) (func(context.Context, *rdq.Task) error, error) {
	ep, err := c.endpoint(target)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, t *rdq.Task) error { return c.call(ctx, ep, t) }, nil
}

// Router returns one handler that POSTs each task to the target of its
// queue, from targets (queue name → target), every one checked now against
// the allowlist. A task of a queue without a target fails permanently.
func (c *Caller) Router(targets map[string]Target) (func(context.Context, *rdq.Task) error, error) {
	parsed := make(map[string]endpoint, len(targets))
	for queue, target := range targets {
		if err := rdq.ValidateName("queue", queue); err != nil {
			return nil, err
		}
		ep, err := c.endpoint(target)
		if err != nil {
			return nil, fmt.Errorf("queue %s: %w", queue, err)
		}
		parsed[queue] = ep
	}
	return func(ctx context.Context, t *rdq.Task) error {
		ep, ok := parsed[t.Queue]
		if !ok {
			return rdq.Permanent(fmt.Errorf("callback: no callback target for queue %q", t.Queue))
		}
		return c.call(ctx, ep, t)
	}, nil
}

// StatusError is the failure of a callback that answered with a status
// other than 2xx and without a structured failure body. Its error type
// (for grouping in the DLQ) is "http_" and the status code, e.g.
// "http_503".
type StatusError struct {
	// URL is the target, without query.
	URL string
	// StatusCode and Status are the response's.
	StatusCode int
	Status     string
	// Location is the redirect target of a 3xx response, if any.
	Location string
	// Body is the start of the response body, valid UTF-8, at most
	// Config.MaxErrorBody bytes plus a truncation mark.
	Body string
}

// Error describes the failure: target, status and the start of the body.
func (e *StatusError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "callback POST %s: %s", e.URL, e.Status)
	if e.Location != "" {
		fmt.Fprintf(&b, " (redirect to %s not followed)", e.Location)
	}
	if e.Body != "" {
		fmt.Fprintf(&b, ": body: %s", e.Body)
	}
	return b.String()
}

// ErrorType names the failure by status code, e.g. "http_500".
func (e *StatusError) ErrorType() string { return "http_" + strconv.Itoa(e.StatusCode) }

// TransportError is a callback that got no response: connection refused,
// reset, DNS failure, TLS error. It is retryable; its error type is
// "transport".
type TransportError struct {
	// URL is the target, without query.
	URL string
	// Err is the underlying error.
	Err error
}

// Error describes the failure: target and the transport error.
func (e *TransportError) Error() string { return fmt.Sprintf("callback POST %s: %v", e.URL, e.Err) }

// Unwrap returns the underlying error.
func (e *TransportError) Unwrap() error { return e.Err }

// ErrorType is "transport".
func (e *TransportError) ErrorType() string { return "transport" }

// Retryable reports whether a callback answering with status code is
// retried: 408, 429 and 5xx are; every other non-2xx status is permanent.
func Retryable(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500
}

func (c *Caller) call(ctx context.Context, ep endpoint, t *rdq.Task) error {
	u := ep.url
	target := redact(u)
	if err := c.allow.check(u); err != nil {
		return rdq.Permanent(err)
	}
	callCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := c.newRequest(callCtx, ep, t)
	if err != nil {
		// Nothing about this task will build a request next time either.
		return rdq.Permanent(fmt.Errorf("callback POST %s: %w", target, err))
	}
	resp, err := c.client.Do(req)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			// The worker's context ended: its timeout or shutdown.
			return fmt.Errorf("callback POST %s: %w", target, context.Cause(ctx))
		case callCtx.Err() != nil:
			return fmt.Errorf("callback POST %s: %w", target, &rdq.TimeoutError{After: c.timeout})
		case errors.Is(err, ErrNotAllowed):
			return rdq.Permanent(err)
		}
		return &TransportError{URL: target, Err: unwrapURLError(err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		// Drain a little so the connection can be reused; the body of a
		// success is not used.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil
	}
	// A structured failure body is read whole, up to MaxFailureBody;
	// any other body only as far as the message keeps of it.
	structured := resp.StatusCode >= 400 && isFailureType(resp.Header.Get("Content-Type"))
	limit := c.maxErrorBody
	if structured {
		limit = max(limit, MaxFailureBody)
	}
	buf, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	if err != nil && callCtx.Err() != nil && ctx.Err() == nil {
		return fmt.Errorf("callback POST %s: %s, reading the body: %w", target, resp.Status, &rdq.TimeoutError{After: c.timeout})
	}
	if structured && err == nil && len(buf) <= limit {
		if re, ok := parseFailure(buf); ok {
			return c.outcome(resp, re)
		}
	}
	se := &StatusError{URL: target, StatusCode: resp.StatusCode, Status: resp.Status, Body: snippet(buf, c.maxErrorBody)}
	if se.Status == "" {
		se.Status = strconv.Itoa(resp.StatusCode)
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		se.Location = resp.Header.Get("Location")
		if loc, err := url.Parse(se.Location); err == nil {
			se.Location = redact(u.ResolveReference(loc))
		}
	}
	return c.outcome(resp, se)
}

// outcome classifies err, the failure of a callback answered by resp, by
// the response's status and Retry-After.
func (c *Caller) outcome(resp *http.Response, err error) error {
	if !Retryable(resp.StatusCode) {
		return rdq.Permanent(err)
	}
	if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
		return rdq.RetryAfter(min(d, c.maxRetryAfter), err)
	}
	return err
}

// newRequest builds the signed request of attempt t to ep.
func (c *Caller) newRequest(ctx context.Context, ep endpoint, t *rdq.Task) (*http.Request, error) {
	now := time.Now()
	body, err := marshalMessage(t, now)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.url.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", c.userAgent)
	c.propagator.Inject(ctx, propagation.HeaderCarrier(h))
	if h.Get("traceparent") == "" {
		for _, k := range []string{"traceparent", "tracestate"} {
			if v := t.Headers[k]; v != "" {
				h.Set(k, v)
			}
		}
	}
	id, ts := t.ID.String(), now.Unix()
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderSignature, signatureVersion+base64.StdEncoding.EncodeToString(mac(ep.key, id, ts, body)))
	for k, vs := range h {
		for _, v := range vs {
			if !validFieldValue(v) {
				return nil, fmt.Errorf("header %s: the value %q cannot be sent in HTTP", k, v)
			}
		}
	}
	return req, nil
}

// snippet returns the start of a failed response's body as valid UTF-8,
// at most limit bytes, marking a truncation.
func snippet(buf []byte, limit int) string {
	more := len(buf) > limit
	if more {
		buf = buf[:limit]
		// Drop a rune cut in half by the limit.
		for i := len(buf) - 1; i >= 0 && i >= len(buf)-utf8.UTFMax; i-- {
			if utf8.RuneStart(buf[i]) {
				if !utf8.FullRune(buf[i:]) {
					buf = buf[:i]
				}
				break
			}
		}
	}
	s := strings.TrimSpace(strings.ToValidUTF8(string(buf), "\uFFFD"))
	if more {
		s += "…[truncated]"
	}
	return s
}

// parseRetryAfter reads a Retry-After value: delay seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		if secs > int64(24*365*time.Hour/time.Second) {
			secs = int64(24 * 365 * time.Hour / time.Second)
		}
		return time.Duration(secs) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// allowTransport enforces the allowlist on every request it sends.
type allowTransport struct {
	allow allowlist
	next  http.RoundTripper
}

func (t *allowTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.allow.check(req.URL); err != nil {
		if req.Body != nil {
			// The request is refused before it is sent; closing its body only
			// releases it, as RoundTrip must, and has nothing to report.
			_ = req.Body.Close()
		}
		return nil, err
	}
	return t.next.RoundTrip(req)
}

// validFieldValue reports whether v can be sent as an HTTP header value.
func validFieldValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
