package callback

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
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
	// ErrUnsigned: the request has no timestamp or no signature header.
	ErrUnsigned = errors.New("callback: request is not signed")
	// ErrBadSignature: no signature in the request matches the body and
	// timestamp under the secret, or the headers are malformed.
	ErrBadSignature = errors.New("callback: signature does not match")
	// ErrStale: the signed timestamp is further from now than the allowed
	// skew, so the request may be a replay.
	ErrStale = errors.New("callback: signature timestamp is outside the allowed window")
	// ErrBodyTooLarge: the body is larger than MaxVerifyBody.
	ErrBodyTooLarge = errors.New("callback: request body is too large to verify")
)

// DefaultMaxSkew is the timestamp window Verify allows when given a
// non-positive maxSkew.
const DefaultMaxSkew = 5 * time.Minute

// MaxVerifyBody bounds the body Verify reads: a callback body is a task
// payload, at most rdq.MaxPayloadBytes.
const MaxVerifyBody = rdq.MaxPayloadBytes

// signatureVersion prefixes every signature, so the scheme can change
// without ambiguity.
const signatureVersion = "v1="

// Sign returns the X-Rdq-Signature value for a request sent at the Unix time
// timestamp (seconds) with body: "v1=" followed by the lowercase hex
// HMAC-SHA256, under secret, of the decimal timestamp, a ".", and the body.
func Sign(secret []byte, timestamp int64, body []byte) string {
	return signatureVersion + hex.EncodeToString(mac(secret, timestamp, body))
}

func mac(secret []byte, timestamp int64, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(strconv.FormatInt(timestamp, 10)))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks that r is a callback signed with secret: it reads the body
// (at most MaxVerifyBody bytes), checks that X-Rdq-Timestamp is within
// maxSkew of now (DefaultMaxSkew if maxSkew <= 0) and that X-Rdq-Signature
// holds a "v1=" signature of timestamp and body, compared in constant time.
// The header may list several comma-separated signatures (during a secret
// rotation); one match suffices.
//
// On success it returns the body and leaves r.Body readable again from the
// start. Errors wrap ErrUnsigned, ErrBadSignature, ErrStale or
// ErrBodyTooLarge; a receiver should answer them with 401 (a non-retryable
// status, so a mis-signed task goes to the dead-letter queue rather than
// being retried forever).
func Verify(r *http.Request, secret []byte, maxSkew time.Duration) ([]byte, error) {
	return verifyAt(r, secret, maxSkew, time.Now())
}

func verifyAt(r *http.Request, secret []byte, maxSkew time.Duration, now time.Time) ([]byte, error) {
	if maxSkew <= 0 {
		maxSkew = DefaultMaxSkew
	}
	if len(secret) == 0 {
		return nil, fmt.Errorf("%w: verifying with an empty secret", ErrBadSignature)
	}
	tsHeader := r.Header.Get(HeaderTimestamp)
	sigHeader := r.Header.Get(HeaderSignature)
	if tsHeader == "" || sigHeader == "" {
		return nil, fmt.Errorf("%w: want headers %s and %s", ErrUnsigned, HeaderTimestamp, HeaderSignature)
	}
	ts, err := strconv.ParseInt(tsHeader, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not a Unix time in seconds", ErrBadSignature, HeaderTimestamp)
	}
	skew := now.Sub(time.Unix(ts, 0))
	if skew > maxSkew || skew < -maxSkew {
		return nil, fmt.Errorf("%w: timestamp is %s away from now; at most %s is allowed", ErrStale, skew.Round(time.Second), maxSkew)
	}
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	want := mac(secret, ts, body)
	matched := false
	for _, part := range strings.Split(sigHeader, ",") {
		part = strings.TrimSpace(part)
		hexSig, ok := strings.CutPrefix(part, signatureVersion)
		if !ok {
			continue
		}
		got, err := hex.DecodeString(hexSig)
		if err != nil {
			continue
		}
		if hmac.Equal(got, want) {
			matched = true
		}
	}
	if !matched {
		return nil, fmt.Errorf("%w: no %s signature in %s matches", ErrBadSignature, strings.TrimSuffix(signatureVersion, "="), HeaderSignature)
	}
	return body, nil
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

// VerifyHandler wraps next so that it only sees requests that pass Verify
// with secret and maxSkew; others get 401 with a short plain-text reason
// (413 for a body over MaxVerifyBody). next can read the verified body from
// r.Body as usual.
func VerifyHandler(secret []byte, maxSkew time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := Verify(r, secret, maxSkew); err != nil {
			status := http.StatusUnauthorized
			if errors.Is(err, ErrBodyTooLarge) {
				status = http.StatusRequestEntityTooLarge
			}
			http.Error(w, err.Error(), status)
			return
		}
		next.ServeHTTP(w, r)
	})
}
