package callback

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/srjn45/rdq"
)

// Errors of Verify, wrapped with details; check them with errors.Is.
var (
	// ErrUnsigned: the request lacks webhook-id, webhook-timestamp or
	// webhook-signature.
	ErrUnsigned = errors.New("callback: request is not signed")
	// ErrBadSignature: no signature in the request matches its id,
	// timestamp and body under the secret, or the headers are malformed.
	ErrBadSignature = errors.New("callback: signature does not match")
	// ErrStale: the signed timestamp is further from now than the allowed
	// skew, so the request may be a replay.
	ErrStale = errors.New("callback: signature timestamp is outside the allowed window")
	// ErrBodyTooLarge: the body is larger than MaxVerifyBody.
	ErrBodyTooLarge = errors.New("callback: request body is too large to verify")
	// ErrMalformed: the signature matches but the body is not an rdq
	// callback message, or names another message than webhook-id.
	ErrMalformed = errors.New("callback: signed body is not an rdq callback message")
)

// DefaultMaxSkew is the timestamp window Verify allows when given a
// non-positive maxSkew.
const DefaultMaxSkew = 5 * time.Minute

// MaxVerifyBody bounds the body Verify reads: a message carries one task
// payload (at most rdq.MaxPayloadBytes, base64-encoded unless it is JSON)
// and the task's headers.
const MaxVerifyBody = 2 * rdq.MaxPayloadBytes

// SecretPrefix marks a secret written in the Standard Webhooks form:
// "whsec_" followed by the standard base64 encoding of the key.
const SecretPrefix = "whsec_"

// signatureVersion prefixes every signature, so the scheme can change
// without ambiguity.
const signatureVersion = "v1,"

// signingKey returns the HMAC key of secret: the decoded key of a
// "whsec_<base64>" secret, else the secret's bytes as they are.
func signingKey(secret []byte) ([]byte, error) {
	enc, ok := bytes.CutPrefix(secret, []byte(SecretPrefix))
	if !ok {
		return secret, nil
	}
	key := make([]byte, base64.StdEncoding.DecodedLen(len(enc)))
	n, err := base64.StdEncoding.Decode(key, enc)
	if err != nil {
		return nil, fmt.Errorf("a %s secret must be followed by standard base64: %w", SecretPrefix, err)
	}
	return key[:n], nil
}

// Sign returns the webhook-signature value of a request with message id,
// Unix time timestamp (seconds) and body, as the Standard Webhooks scheme
// defines it: "v1," followed by the standard base64 HMAC-SHA256, under the
// key of secret, of id, ".", the decimal timestamp, "." and the body. A
// secret of the form "whsec_<base64>" signs with the decoded key; any
// other secret with its bytes. A malformed whsec_ secret yields "".
func Sign(secret []byte, id string, timestamp int64, body []byte) string {
	key, err := signingKey(secret)
	if err != nil {
		return ""
	}
	return signatureVersion + base64.StdEncoding.EncodeToString(mac(key, id, timestamp, body))
}

func mac(key []byte, id string, timestamp int64, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write([]byte(strconv.FormatInt(timestamp, 10)))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks that r is a callback signed with secret and returns the
// message it carries. It reads the body (at most MaxVerifyBody bytes),
// checks that webhook-timestamp is within maxSkew of now (DefaultMaxSkew
// if maxSkew <= 0) and that webhook-signature holds a "v1," signature of
// webhook-id, timestamp and body, compared in constant time. The header
// may list several space-separated signatures (during a secret rotation);
// one match suffices. It then decodes the body, whose task id must be
// webhook-id.
//
// Everything a receiver may act on (task id, queue, handler, attempt,
// life, lease token, content type, headers, payload) is in the signed
// body; nothing in the request's other headers is signed.
//
// On success it leaves r.Body readable again from the start. Errors wrap
// ErrUnsigned, ErrBadSignature, ErrStale, ErrBodyTooLarge or ErrMalformed;
// a receiver should answer them with a 4xx status other than 408 and 429
// (VerifyHandler uses 401, 413 and 400), which rdq treats as permanent, so
// a mis-signed task goes to the dead-letter queue rather than being
// retried forever.
func Verify(r *http.Request, secret []byte, maxSkew time.Duration) (*Message, error) {
	return verifyAt(r, secret, maxSkew, time.Now())
}

// parseTimestamp parses a webhook-timestamp in its one canonical form, the
// form Sign signs: decimal digits without sign or leading zeros, so a
// header is accepted only as it was signed.
func parseTimestamp(v string) (int64, error) {
	canonical := v != "" && len(v) <= 19 && (v == "0" || v[0] != '0')
	for i := 0; canonical && i < len(v); i++ {
		canonical = v[i] >= '0' && v[i] <= '9'
	}
	ts, err := strconv.ParseInt(v, 10, 64)
	if !canonical || err != nil {
		return 0, fmt.Errorf("%q is not a Unix time in seconds written as plain digits (no sign, no leading zeros)", clipHeader(v))
	}
	return ts, nil
}

// clipHeader shortens an untrusted header value for an error message.
func clipHeader(v string) string {
	if len(v) > 32 {
		return v[:32] + "…"
	}
	return v
}

func verifyAt(r *http.Request, secret []byte, maxSkew time.Duration, now time.Time) (*Message, error) {
	if maxSkew <= 0 {
		maxSkew = DefaultMaxSkew
	}
	key, err := signingKey(secret)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSignature, err)
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("%w: verifying with an empty secret", ErrBadSignature)
	}
	id := r.Header.Get(HeaderID)
	tsHeader := r.Header.Get(HeaderTimestamp)
	sigHeader := r.Header.Get(HeaderSignature)
	if id == "" || tsHeader == "" || sigHeader == "" {
		return nil, fmt.Errorf("%w: want headers %s, %s and %s", ErrUnsigned, HeaderID, HeaderTimestamp, HeaderSignature)
	}
	ts, err := parseTimestamp(tsHeader)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %w", ErrBadSignature, HeaderTimestamp, err)
	}
	skew := now.Sub(time.Unix(ts, 0))
	if skew > maxSkew || skew < -maxSkew {
		return nil, fmt.Errorf("%w: timestamp is %s away from now; at most %s is allowed", ErrStale, skew.Round(time.Second), maxSkew)
	}
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	want := mac(key, id, ts, body)
	matched := 0
	for _, part := range strings.Fields(sigHeader) {
		enc, ok := strings.CutPrefix(part, signatureVersion)
		if !ok {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			continue
		}
		// Every candidate is compared, in constant time, whatever an
		// earlier one gave.
		if hmac.Equal(got, want) {
			matched++
		}
	}
	if matched == 0 {
		return nil, fmt.Errorf("%w: no %s signature in %s matches", ErrBadSignature, strings.TrimSuffix(signatureVersion, ","), HeaderSignature)
	}
	var m Message
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if m.Type != MessageType || m.Data.ID != id {
		return nil, fmt.Errorf("%w: want type %q and data.id equal to %s %q", ErrMalformed, MessageType, HeaderID, id)
	}
	m.Raw = body
	return &m, nil
}

func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		r.Body = http.NoBody
		return nil, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxVerifyBody+1))
	if closeErr := r.Body.Close(); err == nil && closeErr != nil {
		err = closeErr
	}
	if err != nil {
		return nil, fmt.Errorf("callback: reading the request body: %w", err)
	}
	if len(body) > MaxVerifyBody {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, MaxVerifyBody)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

type messageKey struct{}

// MessageFrom returns the verified message VerifyHandler stored in ctx.
func MessageFrom(ctx context.Context) (*Message, bool) {
	m, ok := ctx.Value(messageKey{}).(*Message)
	return m, ok && m != nil
}

// VerifyHandler wraps next so that it only sees requests that pass Verify
// with secret and maxSkew; others get a short plain-text reason with 401
// (unsigned, mis-signed, stale), 413 (a body over MaxVerifyBody) or 400 (a
// signed body that is not a callback message), which a Caller records by
// the status ("http_401"): a refusal is the receiver's, not a handler's
// failure. next finds the verified message with MessageFrom(r.Context())
// and can read the raw body from r.Body as usual, and answers a failure
// with WriteFailure.
func VerifyHandler(secret []byte, maxSkew time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m, err := Verify(r, secret, maxSkew)
		if err != nil {
			status := http.StatusUnauthorized
			switch {
			case errors.Is(err, ErrBodyTooLarge):
				status = http.StatusRequestEntityTooLarge
			case errors.Is(err, ErrMalformed):
				status = http.StatusBadRequest
			}
			http.Error(w, err.Error(), status)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), messageKey{}, m)))
	})
}
