package callback

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"

	"github.com/srjn45/rdq"
)

// The structured failure body of a callback response, version 1.
//
// A receiver whose handler failed may answer, with the status that decides
// the outcome (5xx, 408 and 429 retryable, other 4xx permanent,
// Retry-After honoured), a body of media type FailureContentType:
//
//	{"version": 1, "error_type": "BankError", "message": "bank unreachable", "stack": "BankError: …"}
//
// version is 1 and error_type a string (empty reads as "error"); message
// and stack are strings, stack optional (absent or null: none). Other
// members are ignored, so a receiver may add its own; a change of meaning
// takes another version, which this version reads as plain text. A Caller records such a failure as an
// rdq.RemoteError with the handler's type, message and stack, cleaned and
// capped as every failure is (see rdq.Describe), exactly as it records the
// Failure of a gRPC handler; one of rdq's reserved types
// (rdq.IsReservedErrorType: lease_expired, cancelled, unserved_handler) is
// recorded with the prefix rdq.RemoteTypePrefix ("remote_cancelled"). A body that is not this document (another
// media type, another version, a member of the wrong type, invalid JSON,
// more than MaxFailureBody bytes) is read as any other body: the status
// names the failure ("http_500") and the start of the body is its message.
const (
	// FailureContentType is the media type of a structured failure body.
	FailureContentType = "application/vnd.rdq.failure+json"
	// FailureVersion is the version of the failure body this package
	// writes and reads.
	FailureVersion = 1
	// MaxFailureBody is the largest failure body a Caller parses, in
	// bytes: room for a type, a message and a stack at the caps of
	// rdq.MaxErrorTypeLength, rdq.MaxMessageBytes and rdq.MaxStackBytes
	// even when every byte is escaped (\u0000). A receiver keeps within
	// it by cutting its text to those caps.
	MaxFailureBody = 512 << 10
)

// FailureBody is the structured failure body (see FailureContentType).
type FailureBody struct {
	Version   int    `json:"version"`
	ErrorType string `json:"error_type"`
	Message   string `json:"message"`
	Stack     string `json:"stack,omitempty"`
}

// isFailureType reports whether a Content-Type header value names
// FailureContentType, parameters aside.
func isFailureType(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == FailureContentType
}

// parseFailure reads body as a structured failure body. It returns false
// for anything but a JSON object of version FailureVersion with string
// error_type and message, and a string stack or none.
func parseFailure(body []byte) (*rdq.RemoteError, bool) {
	// A member of another type (a number, an object) fails the decoding;
	// null leaves its pointer nil.
	var doc struct {
		Version   *int    `json:"version"`
		ErrorType *string `json:"error_type"`
		Message   *string `json:"message"`
		Stack     *string `json:"stack"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || doc.Version == nil || *doc.Version != FailureVersion ||
		doc.ErrorType == nil || doc.Message == nil {
		return nil, false
	}
	re := &rdq.RemoteError{Type: *doc.ErrorType, Message: *doc.Message}
	if doc.Stack != nil {
		re.Stack = *doc.Stack
	}
	return re, true
}

// writeFailure answers a failed attempt with status and the structured
// failure body of err (its rdq.Describe type, message and stack).
func writeFailure(w http.ResponseWriter, status int, err error) {
	f := rdq.Describe(err)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// The body is data, not HTML: keep <, > and & as they are.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(FailureBody{Version: FailureVersion, ErrorType: f.Type, Message: f.Message, Stack: f.Stack}); err != nil {
		http.Error(w, f.Message, status)
		return
	}
	h := w.Header()
	h.Set("Content-Type", FailureContentType)
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	// A failed write is a caller that went away: it records the attempt
	// as a transport error or a timeout on its side.
	_, _ = w.Write(buf.Bytes())
}
