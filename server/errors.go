package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// Code is a stable, machine-readable error code, the same on REST and gRPC.
type Code string

// The error codes. Clients may switch on them; they do not change.
const (
	CodeInvalidArgument      Code = "invalid_argument"
	CodeUnauthenticated      Code = "unauthenticated"
	CodePermissionDenied     Code = "permission_denied"
	CodeNotFound             Code = "not_found"
	CodeMethodNotAllowed     Code = "method_not_allowed"
	CodeNotDead              Code = "not_dead"
	CodeRedriveLimit         Code = "redrive_limit"
	CodeNotPending           Code = "not_pending"
	CodePayloadTooLarge      Code = "payload_too_large"
	CodeUnsupportedMediaType Code = "unsupported_media_type"
	CodeCanceled             Code = "canceled"
	CodeDeadlineExceeded     Code = "deadline_exceeded"
	CodeUnimplemented        Code = "unimplemented"
	CodeUnavailable          Code = "unavailable"
	CodeInternal             Code = "internal"
)

// ErrorDomain is the domain of the google.rpc.ErrorInfo detail that carries
// the Code on gRPC.
const ErrorDomain = "rdq"

// ProblemTypePrefix prefixes the Code in the "type" member of a problem
// document, e.g. "urn:rdq:problem:not_found".
const ProblemTypePrefix = "urn:rdq:problem:"

var codeInfo = map[Code]struct {
	http  int
	grpc  codes.Code
	title string
}{
	CodeInvalidArgument:      {http.StatusBadRequest, codes.InvalidArgument, "Invalid argument"},
	CodeUnauthenticated:      {http.StatusUnauthorized, codes.Unauthenticated, "Unauthenticated"},
	CodePermissionDenied:     {http.StatusForbidden, codes.PermissionDenied, "Permission denied"},
	CodeNotFound:             {http.StatusNotFound, codes.NotFound, "Not found"},
	CodeMethodNotAllowed:     {http.StatusMethodNotAllowed, codes.Unimplemented, "Method not allowed"},
	CodeNotDead:              {http.StatusConflict, codes.FailedPrecondition, "Task is not dead"},
	CodeRedriveLimit:         {http.StatusConflict, codes.FailedPrecondition, "Redrive limit reached"},
	CodeNotPending:           {http.StatusConflict, codes.FailedPrecondition, "Task is not waiting"},
	CodePayloadTooLarge:      {http.StatusRequestEntityTooLarge, codes.ResourceExhausted, "Payload too large"},
	CodeUnsupportedMediaType: {http.StatusUnsupportedMediaType, codes.InvalidArgument, "Unsupported media type"},
	CodeCanceled:             {499, codes.Canceled, "Request canceled"},
	CodeDeadlineExceeded:     {http.StatusGatewayTimeout, codes.DeadlineExceeded, "Deadline exceeded"},
	CodeUnimplemented:        {http.StatusNotImplemented, codes.Unimplemented, "Not implemented"},
	CodeUnavailable:          {http.StatusServiceUnavailable, codes.Unavailable, "Unavailable"},
	CodeInternal:             {http.StatusInternalServerError, codes.Internal, "Internal error"},
}

// HTTPStatus returns the HTTP status of c (500 for an unknown code).
func (c Code) HTTPStatus() int {
	if i, ok := codeInfo[c]; ok {
		return i.http
	}
	return http.StatusInternalServerError
}

// GRPCCode returns the gRPC status code of c (Internal for an unknown code).
func (c Code) GRPCCode() codes.Code {
	if i, ok := codeInfo[c]; ok {
		return i.grpc
	}
	return codes.Internal
}

// Error is an API error: a stable code and a message for the caller. The
// service methods return it; it converts itself to a gRPC status and is
// written as problem+json by the REST handler.
type Error struct {
	Code    Code
	Message string
	// Err is the cause, for errors.Is and logs; it is not shown to
	// callers of internal errors.
	Err error
}

// Error is the code and the message, as callers see them.
func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// GRPCStatus implements the interface grpc-go uses to turn a returned error
// into a status: the code's gRPC code, the message, and a
// google.rpc.ErrorInfo detail whose reason is the Code.
func (e *Error) GRPCStatus() *status.Status {
	st := status.New(e.Code.GRPCCode(), e.Message)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: string(e.Code), Domain: ErrorDomain}); err == nil {
		return d
	}
	return st
}

func errorf(code Code, msg string) *Error { return &Error{Code: code, Message: msg} }

// CodeOf returns the stable code of an error returned by a Service method,
// a gRPC call to one, or anything else (classified as the service does).
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if st, ok := status.FromError(err); ok {
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok && info.Domain == ErrorDomain {
				return Code(info.Reason)
			}
		}
	}
	return classify(err).Code
}

// classify maps an error from the library to an API error. Unknown errors
// are internal; their text is not shown to the caller.
func classify(err error) *Error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, store.ErrNotFound):
		return &Error{Code: CodeNotFound, Message: cleanMessage(err), Err: err}
	case errors.Is(err, store.ErrNotDead):
		return &Error{Code: CodeNotDead, Message: cleanMessage(err), Err: err}
	case errors.Is(err, store.ErrRedriveLimit):
		return &Error{Code: CodeRedriveLimit, Message: cleanMessage(err), Err: err}
	case errors.Is(err, store.ErrNotPending):
		return &Error{Code: CodeNotPending, Message: cleanMessage(err), Err: err}
	case errors.Is(err, rdq.ErrInvalid):
		return &Error{Code: CodeInvalidArgument, Message: cleanMessage(err), Err: err}
	case errors.Is(err, ErrUnauthenticated):
		return &Error{Code: CodeUnauthenticated, Message: "missing or invalid bearer token", Err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Code: CodeDeadlineExceeded, Message: "the request took too long", Err: err}
	case errors.Is(err, context.Canceled):
		return &Error{Code: CodeCanceled, Message: "the request was canceled", Err: err}
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		if c, ok := codeOfGRPC[st.Code()]; ok {
			return &Error{Code: c, Message: st.Message(), Err: err}
		}
	}
	return &Error{Code: CodeInternal, Message: "internal error; the server log has the details", Err: err}
}

// codeOfGRPC turns a gRPC status code that carries no rdq ErrorInfo into
// one Code. Several Codes share a gRPC code; each gRPC code maps to exactly
// one of them, always the same: the general code where there is one
// (Unimplemented → unimplemented, InvalidArgument → invalid_argument), and
// for FailedPrecondition not_dead, the precondition most operations check.
var codeOfGRPC = map[codes.Code]Code{
	codes.InvalidArgument:    CodeInvalidArgument,
	codes.Unauthenticated:    CodeUnauthenticated,
	codes.PermissionDenied:   CodePermissionDenied,
	codes.NotFound:           CodeNotFound,
	codes.Unimplemented:      CodeUnimplemented,
	codes.FailedPrecondition: CodeNotDead,
	codes.ResourceExhausted:  CodePayloadTooLarge,
	codes.Canceled:           CodeCanceled,
	codes.DeadlineExceeded:   CodeDeadlineExceeded,
	codes.Unavailable:        CodeUnavailable,
	codes.Internal:           CodeInternal,
}

// storeNames matches the package prefixes of store errors ("pgstore: ",
// "sqlitestore: ", "rdq/store: "): which store serves the API is not the
// caller's business.
var storeNames = regexp.MustCompile(`\b(?:rdq/)?[a-z0-9]*store: `)

// cleanMessage drops the package prefixes of library errors ("client:
// submit: rdq: invalid input: ", "pgstore: ") that mean nothing to an API
// caller, or tell more than it needs to know.
func cleanMessage(err error) string {
	msg := storeNames.ReplaceAllString(err.Error(), "")
	for _, p := range []string{"client: submit: ", "client: ", "dlq: ", "rdq: invalid input: "} {
		for {
			i := strings.Index(msg, p)
			if i < 0 {
				break
			}
			msg = msg[:i] + msg[i+len(p):]
		}
	}
	return msg
}

// Problem is an RFC 9457 problem document, as the REST handler writes it.
type Problem struct {
	// Type is ProblemTypePrefix + Code.
	Type string `json:"type"`
	// Title is a short summary of the code.
	Title string `json:"title"`
	// Status is the HTTP status.
	Status int `json:"status"`
	// Detail says what went wrong with this request.
	Detail string `json:"detail,omitempty"`
	// Instance is the request path.
	Instance string `json:"instance,omitempty"`
	// Code is the stable error code.
	Code Code `json:"code"`
}

func newProblem(e *Error, instance string) Problem {
	title := "Error"
	if i, ok := codeInfo[e.Code]; ok {
		title = i.title
	}
	return Problem{
		Type:     ProblemTypePrefix + string(e.Code),
		Title:    title,
		Status:   e.Code.HTTPStatus(),
		Detail:   e.Message,
		Instance: instance,
		Code:     e.Code,
	}
}

func writeProblem(w http.ResponseWriter, r *http.Request, e *Error) {
	p := newProblem(e, r.URL.Path)
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("X-Content-Type-Options", "nosniff")
	if e.Code == CodeUnauthenticated {
		h.Set("WWW-Authenticate", `Bearer realm="rdq"`)
	}
	w.WriteHeader(p.Status)
	// The status line is already sent: a failed write (the client went
	// away) has no one left to report to.
	_ = json.NewEncoder(w).Encode(p)
}
