package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/envelope"
	"github.com/srjn45/rdq/proto/rdqv1"
)

// --- wire shapes of the REST mapping ---

type restError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func restErr(e *rdqv1.Error) *restError {
	if e == nil {
		return nil
	}
	return &restError{Code: e.GetCode(), Message: e.GetMessage()}
}

type restFailure struct {
	ErrorType string `json:"error_type"`
	Message   string `json:"message"`
}

// restFilter is DeadFilter in a JSON body.
type restFilter struct {
	Queue           string `json:"queue"`
	Handler         string `json:"handler"`
	ErrorType       string `json:"error_type"`
	Fingerprint     string `json:"fingerprint"`
	DeadAfter       string `json:"dead_after"`
	DeadBefore      string `json:"dead_before"`
	MessageContains string `json:"message_contains"`
	LifeMin         int32  `json:"life_min"`
	LifeBelow       int32  `json:"life_below"`
}

func (f *restFilter) proto(prefix string) (*rdqv1.DeadFilter, error) {
	if f == nil {
		return nil, nil
	}
	out := &rdqv1.DeadFilter{
		Queue: f.Queue, Handler: f.Handler, ErrorType: f.ErrorType,
		Fingerprint: f.Fingerprint, MessageContains: f.MessageContains,
		LifeMin: f.LifeMin, LifeBelow: f.LifeBelow,
	}
	var err error
	if out.DeadAfter, err = parseTime(prefix+"dead_after", f.DeadAfter); err != nil {
		return nil, err
	}
	if out.DeadBefore, err = parseTime(prefix+"dead_before", f.DeadBefore); err != nil {
		return nil, err
	}
	return out, nil
}

func parseTime(field, v string) (*timestamppb.Timestamp, error) {
	if v == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return nil, errorf(CodeInvalidArgument, fmt.Sprintf("%s %q is not an RFC 3339 time such as 2024-06-01T12:00:00Z", field, v))
	}
	return timestamppb.New(t), nil
}

func parseInt(field, v string, bits int) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, bits)
	if err != nil {
		return 0, errorf(CodeInvalidArgument, fmt.Sprintf("%s %q is not a whole number", field, v))
	}
	return n, nil
}

func filterFromQuery(q url.Values) (*rdqv1.DeadFilter, error) {
	f := &restFilter{
		Queue: q.Get("queue"), Handler: q.Get("handler"), ErrorType: q.Get("error_type"),
		Fingerprint: q.Get("fingerprint"), MessageContains: q.Get("message_contains"),
		DeadAfter: q.Get("dead_after"), DeadBefore: q.Get("dead_before"),
	}
	for _, n := range []struct {
		field string
		dst   *int32
	}{{"life_min", &f.LifeMin}, {"life_below", &f.LifeBelow}} {
		v, err := parseInt(n.field, q.Get(n.field), 32)
		if err != nil {
			return nil, err
		}
		*n.dst = int32(v)
	}
	return f.proto("")
}

// envelopeJSON renders a task message, and optionally its history, as the
// wire envelope.
func envelopeJSON(pt *rdqv1.Task, history []*rdqv1.Attempt) (json.RawMessage, error) {
	t, err := TaskFromProto(pt)
	if err != nil {
		return nil, fmt.Errorf("rendering task %s: %w", pt.GetId(), err)
	}
	env := envelope.Envelope{Task: *t}
	for _, pa := range history {
		a, err := AttemptFromProto(t.ID, pa)
		if err != nil {
			return nil, fmt.Errorf("rendering task %s: %w", t.ID, err)
		}
		env.History = append(env.History, a)
	}
	if len(history) > 0 && env.History == nil {
		env.History = []rdq.Attempt{}
	}
	b, err := envelope.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("rendering task %s: %w", t.ID, err)
	}
	return b, nil
}

// specFromEnvelope decodes a submission: the envelope plus the optional
// first_failure member.
func specFromEnvelope(raw []byte) (*rdqv1.TaskSpec, error) {
	env, err := envelope.Unmarshal(raw)
	if err != nil {
		return nil, err
	}
	var extra struct {
		FirstFailure *restFailure `json:"first_failure"`
	}
	// The envelope is decoded once; the document is read again only if
	// it may hold a first_failure member (Go's decoder matches member
	// names case-insensitively, and a name may be written with escapes).
	if mayHoldMember(raw, "first_failure") {
		if err := unmarshalJSON(raw, &extra); err != nil {
			return nil, err
		}
	}
	spec := &rdqv1.TaskSpec{
		Version:        envelope.Version,
		Queue:          env.Task.Queue,
		Handler:        env.Task.Handler,
		Payload:        env.Task.Payload,
		ContentType:    env.Task.ContentType,
		Headers:        env.Task.Headers,
		IdempotencyKey: env.Task.IdempotencyKey,
		DelayMs:        env.Delay.Milliseconds(),
		MaxAttempts:    int32(min(env.Task.MaxAttempts, math.MaxInt32)),
		TimeoutMs:      env.Task.Timeout.Milliseconds(),
	}
	if ff := extra.FirstFailure; ff != nil {
		spec.FirstFailure = &rdqv1.FailureSpec{ErrorType: ff.ErrorType, Message: ff.Message}
	}
	return spec, nil
}

// mayHoldMember reports whether the JSON document raw may have a member
// called name (lowercase ASCII letters and '_'): true if name occurs in
// it, ignoring ASCII case, or if it holds an escape sequence or a non-ASCII
// byte that a decoder could fold onto one of name's letters. false is
// certain; true may be wrong.
func mayHoldMember(raw []byte, name string) bool {
	n := len(name)
	for i := 0; i+n <= len(raw); i++ {
		if raw[i]|0x20 == name[0] && bytes.EqualFold(raw[i:i+n], []byte(name)) {
			return true
		}
	}
	// "\u0066irst_failure", and the Unicode letters Go's decoder folds
	// onto 's' and 'k' (U+017F, U+212A).
	return bytes.Contains(raw, []byte(`\u`)) || bytes.Contains(raw, []byte("\u017f")) || bytes.Contains(raw, []byte("\u212a"))
}

// --- the REST forms of the RPCs: each decode makes an RPC's request of an
// HTTP request, each render makes the response body of an RPC's response ---

// fromBody returns a decoder of a JSON body into a T, made into the RPC's
// request by convert.
func fromBody[T, Req any](convert func(*T) (Req, error)) func(*Service, *http.Request) (Req, error) {
	return func(s *Service, r *http.Request) (Req, error) {
		var body T
		if err := s.decodeJSON(r, &body); err != nil {
			var zero Req
			return zero, err
		}
		return convert(&body)
	}
}

// taskWithHistory is a response holding one task and its attempts.
type taskWithHistory interface {
	GetTask() *rdqv1.Task
	GetHistory() []*rdqv1.Attempt
}

// renderTask renders the task of res, with its history, as the wire
// envelope.
func renderTask[Req any, Res taskWithHistory](_ Req, res Res) (any, error) {
	return envelopeJSON(res.GetTask(), res.GetHistory())
}

// envelopesJSON renders task messages as wire envelopes, without history.
func envelopesJSON(pts []*rdqv1.Task) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, len(pts))
	for i, pt := range pts {
		var err error
		if out[i], err = envelopeJSON(pt, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Submit.

type restSubmitResponse struct {
	Task      json.RawMessage `json:"task"`
	Duplicate bool            `json:"duplicate"`
}

func decodeSubmit(s *Service, r *http.Request) (*rdqv1.SubmitRequest, error) {
	body, err := s.readBody(r)
	if err != nil {
		return nil, err
	}
	spec, err := specFromEnvelope(body)
	if err != nil {
		return nil, err
	}
	return &rdqv1.SubmitRequest{Task: spec}, nil
}

func renderSubmit(_ *rdqv1.SubmitRequest, res *rdqv1.SubmitResponse) (any, error) {
	env, err := envelopeJSON(res.GetTask(), nil)
	if err != nil {
		return nil, err
	}
	return restSubmitResponse{Task: env, Duplicate: res.GetDuplicate()}, nil
}

// SubmitBatch.

type restSubmitResult struct {
	Task      json.RawMessage `json:"task,omitempty"`
	Duplicate bool            `json:"duplicate,omitempty"`
	Error     *restError      `json:"error,omitempty"`
}

// restBatch is a decoded SubmitBatch body: the request of its valid
// envelopes and a result per envelope, those of the invalid ones holding
// their error; index[j] is the result of the request's j-th task.
type restBatch struct {
	req     *rdqv1.SubmitBatchRequest
	results []restSubmitResult
	index   []int
}

func decodeSubmitBatch(s *Service, r *http.Request) (*restBatch, error) {
	specs, results, index, err := s.decodeBatch(r)
	if err != nil {
		return nil, err
	}
	return &restBatch{req: &rdqv1.SubmitBatchRequest{Tasks: specs}, results: results, index: index}, nil
}

// submitBatch calls SubmitBatch with the valid envelopes of b.
func submitBatch(s *Service, ctx context.Context, b *restBatch) (*rdqv1.SubmitBatchResponse, error) {
	return s.SubmitBatch(ctx, b.req)
}

func renderSubmitBatch(b *restBatch, res *rdqv1.SubmitBatchResponse) (any, error) {
	results := b.results
	for j, item := range res.GetResults() {
		out := &results[b.index[j]]
		if item.GetError() != nil {
			out.Error = restErr(item.GetError())
			continue
		}
		var err error
		if out.Task, err = envelopeJSON(item.GetTask(), nil); err != nil {
			return nil, err
		}
		out.Duplicate = item.GetDuplicate()
	}
	return map[string]any{"results": results}, nil
}

// decodeBatch reads a {"tasks": [envelope, ...]} body as a stream: each
// envelope is decoded once, as it arrives, and the body is never held
// whole. It returns the valid tasks, a result per envelope (with the error
// of each invalid one) and, for each valid task, the index of its result.
func (s *Service) decodeBatch(r *http.Request) (specs []*rdqv1.TaskSpec, results []restSubmitResult, index []int, err error) {
	rd, err := s.bodyReader(r)
	if err != nil {
		return nil, nil, nil, err
	}
	dec := json.NewDecoder(rd)
	fail := func(err error) error {
		var mbe *http.MaxBytesError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &mbe):
			return s.readError(err)
		case errors.Is(err, io.EOF):
			return errorf(CodeInvalidArgument, `the request body is empty or cut short; send {"tasks": [...]}`)
		case errors.Is(err, io.ErrUnexpectedEOF), errors.As(err, &se):
			return jsonError(err)
		}
		return s.readError(err)
	}
	if tok, err := dec.Token(); err != nil {
		return nil, nil, nil, fail(err)
	} else if tok != json.Delim('{') {
		return nil, nil, nil, errorf(CodeInvalidArgument, `the body must be a JSON object: {"tasks": [...]}`)
	}
	seen := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, nil, fail(err)
		}
		if tok != "tasks" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, nil, nil, fail(err)
			}
			continue
		}
		if seen {
			return nil, nil, nil, errorf(CodeInvalidArgument, `the body has two "tasks" members; send one`)
		}
		seen = true
		if tok, err := dec.Token(); err != nil {
			return nil, nil, nil, fail(err)
		} else if tok != json.Delim('[') {
			return nil, nil, nil, errorf(CodeInvalidArgument, "tasks: want a JSON array of task envelopes")
		}
		for dec.More() {
			if len(results) == MaxBatch {
				return nil, nil, nil, errorf(CodeInvalidArgument, fmt.Sprintf("a batch holds at most %d tasks; this one has more", MaxBatch))
			}
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return nil, nil, nil, fail(err)
			}
			results = append(results, restSubmitResult{})
			spec, err := specFromEnvelope(raw)
			if err != nil {
				e := classify(err)
				results[len(results)-1].Error = &restError{Code: string(e.Code), Message: e.Message}
				continue
			}
			specs = append(specs, spec)
			index = append(index, len(results)-1)
		}
		if _, err := dec.Token(); err != nil { // ']'
			return nil, nil, nil, fail(err)
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, nil, nil, fail(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err == nil {
			return nil, nil, nil, errorf(CodeInvalidArgument, "the body holds more than one JSON value")
		}
		return nil, nil, nil, fail(err)
	}
	if results == nil {
		results = []restSubmitResult{}
	}
	return specs, results, index, nil
}

// GetTask and ShowDead.

func decodeGetTask(_ *Service, r *http.Request) (*rdqv1.GetTaskRequest, error) {
	return &rdqv1.GetTaskRequest{Id: r.PathValue("id")}, nil
}

func decodeShowDead(_ *Service, r *http.Request) (*rdqv1.ShowDeadRequest, error) {
	return &rdqv1.ShowDeadRequest{Id: r.PathValue("id")}, nil
}

// ListDead.

func decodeListDead(_ *Service, r *http.Request) (*rdqv1.ListDeadRequest, error) {
	q := r.URL.Query()
	f, err := filterFromQuery(q)
	if err != nil {
		return nil, err
	}
	size, err := parseInt("page_size", q.Get("page_size"), 32)
	if err != nil {
		return nil, err
	}
	return &rdqv1.ListDeadRequest{Filter: f, PageSize: int32(size), PageToken: q.Get("page_token")}, nil
}

// restTaskPage is a page of tasks, as ListDead and ListTasks render it.
type restTaskPage struct {
	Tasks         []json.RawMessage `json:"tasks"`
	NextPageToken string            `json:"next_page_token"`
}

func renderListDead(_ *rdqv1.ListDeadRequest, res *rdqv1.ListDeadResponse) (any, error) {
	tasks, err := envelopesJSON(res.GetTasks())
	if err != nil {
		return nil, err
	}
	return restTaskPage{tasks, res.GetNextPageToken()}, nil
}

// DeadGroups.

type restGroup struct {
	Fingerprint string    `json:"fingerprint"`
	ErrorType   string    `json:"error_type"`
	Message     string    `json:"message"`
	Count       int64     `json:"count"`
	FirstSeen   time.Time `json:"first_seen"`
	LastSeen    time.Time `json:"last_seen"`
	ExampleID   string    `json:"example_id"`
}

func decodeDeadGroups(_ *Service, r *http.Request) (*rdqv1.DeadGroupsRequest, error) {
	f, err := filterFromQuery(r.URL.Query())
	if err != nil {
		return nil, err
	}
	return &rdqv1.DeadGroupsRequest{Filter: f}, nil
}

func renderDeadGroups(_ *rdqv1.DeadGroupsRequest, res *rdqv1.DeadGroupsResponse) (any, error) {
	groups := make([]restGroup, len(res.GetGroups()))
	for i, g := range res.GetGroups() {
		groups[i] = restGroup{
			Fingerprint: g.GetFingerprint(), ErrorType: g.GetErrorType(), Message: g.GetMessage(), Count: g.GetCount(),
			FirstSeen: g.GetFirstSeen().AsTime().UTC(), LastSeen: g.GetLastSeen().AsTime().UTC(), ExampleID: g.GetExampleId(),
		}
	}
	return map[string]any{"groups": groups}, nil
}

// Redrive.

type restRedriveRequest struct {
	IDs      []string    `json:"ids"`
	Filter   *restFilter `json:"filter"`
	All      bool        `json:"all"`
	Payload  *string     `json:"payload"`
	DelayMs  int64       `json:"delay_ms"`
	SpreadMs int64       `json:"spread_ms"`
	MaxLife  int32       `json:"max_life"`
	Reason   string      `json:"reason"`
}

type restRedriveResult struct {
	ID    string     `json:"id"`
	Error *restError `json:"error,omitempty"`
}

var decodeRedrive = fromBody(func(req *restRedriveRequest) (*rdqv1.RedriveRequest, error) {
	f, err := req.Filter.proto("filter.")
	if err != nil {
		return nil, err
	}
	pr := &rdqv1.RedriveRequest{
		Ids: req.IDs, Filter: f, All: req.All, DelayMs: req.DelayMs, SpreadMs: req.SpreadMs,
		MaxLife: req.MaxLife, Reason: req.Reason,
	}
	if req.Payload != nil {
		if pr.Payload, err = base64.StdEncoding.DecodeString(*req.Payload); err != nil {
			return nil, errorf(CodeInvalidArgument, "payload is not standard base64 (RFC 4648 §4, padded)")
		}
	}
	return pr, nil
})

func renderRedrive(_ *rdqv1.RedriveRequest, res *rdqv1.RedriveResponse) (any, error) {
	out := struct {
		Redriven int64               `json:"redriven"`
		AtLimit  int64               `json:"at_limit"`
		Results  []restRedriveResult `json:"results,omitempty"`
	}{Redriven: res.GetRedriven(), AtLimit: res.GetAtLimit()}
	for _, item := range res.GetResults() {
		out.Results = append(out.Results, restRedriveResult{ID: item.GetId(), Error: restErr(item.GetError())})
	}
	return out, nil
}

// Purge.

type restPurgeRequest struct {
	IDs    []string    `json:"ids"`
	Filter *restFilter `json:"filter"`
	All    bool        `json:"all"`
	Reason string      `json:"reason"`
}

var decodePurge = fromBody(func(req *restPurgeRequest) (*rdqv1.PurgeRequest, error) {
	f, err := req.Filter.proto("filter.")
	if err != nil {
		return nil, err
	}
	return &rdqv1.PurgeRequest{Ids: req.IDs, Filter: f, All: req.All, Reason: req.Reason}, nil
})

func renderPurge(_ *rdqv1.PurgeRequest, res *rdqv1.PurgeResponse) (any, error) {
	return map[string]int64{"purged": res.GetPurged()}, nil
}

// ListAudit.

type restAuditEntry struct {
	ID      int64             `json:"id"`
	At      time.Time         `json:"at"`
	Actor   string            `json:"actor"`
	Action  string            `json:"action"`
	Filter  string            `json:"filter,omitempty"`
	IDs     []string          `json:"ids,omitempty"`
	Count   int64             `json:"count"`
	Reason  string            `json:"reason,omitempty"`
	Details map[string]string `json:"details,omitempty"`
	Queues  []string          `json:"queues,omitempty"`
}

func decodeListAudit(_ *Service, r *http.Request) (*rdqv1.ListAuditRequest, error) {
	q := r.URL.Query()
	req := &rdqv1.ListAuditRequest{Actor: q.Get("actor"), Action: q.Get("action"), PageToken: q.Get("page_token")}
	var err error
	if req.Since, err = parseTime("since", q.Get("since")); err != nil {
		return nil, err
	}
	if req.Until, err = parseTime("until", q.Get("until")); err != nil {
		return nil, err
	}
	size, err := parseInt("page_size", q.Get("page_size"), 32)
	if err != nil {
		return nil, err
	}
	req.PageSize = int32(size)
	return req, nil
}

func renderListAudit(_ *rdqv1.ListAuditRequest, res *rdqv1.ListAuditResponse) (any, error) {
	entries := make([]restAuditEntry, len(res.GetEntries()))
	for i, e := range res.GetEntries() {
		entries[i] = restAuditEntry{
			ID: e.GetId(), At: e.GetAt().AsTime().UTC(), Actor: e.GetActor(), Action: e.GetAction(), Filter: e.GetFilter(),
			IDs: e.GetIds(), Count: e.GetCount(), Reason: e.GetReason(), Details: e.GetDetails(), Queues: e.GetQueues(),
		}
	}
	return struct {
		Entries       []restAuditEntry `json:"entries"`
		NextPageToken string           `json:"next_page_token"`
	}{entries, res.GetNextPageToken()}, nil
}

// QueueStats.

type restQueueStat struct {
	Queue          string `json:"queue"`
	Pending        int64  `json:"pending"`
	InFlight       int64  `json:"in_flight"`
	Dead           int64  `json:"dead"`
	Succeeded      int64  `json:"succeeded"`
	OldestDueAgeMs int64  `json:"oldest_due_age_ms"`
	Paused         bool   `json:"paused"`
}

func decodeQueueStats(_ *Service, r *http.Request) (*rdqv1.QueueStatsRequest, error) {
	window, err := parseInt("succeeded_window_ms", r.URL.Query().Get("succeeded_window_ms"), 64)
	if err != nil {
		return nil, err
	}
	return &rdqv1.QueueStatsRequest{SucceededWindowMs: window}, nil
}

func renderQueueStats(_ *rdqv1.QueueStatsRequest, res *rdqv1.QueueStatsResponse) (any, error) {
	queues := make([]restQueueStat, len(res.GetQueues()))
	for i, q := range res.GetQueues() {
		queues[i] = restQueueStat{
			Queue: q.GetQueue(), Pending: q.GetPending(), InFlight: q.GetInFlight(), Dead: q.GetDead(),
			Succeeded: q.GetSucceeded(), OldestDueAgeMs: q.GetOldestDueAgeMs(), Paused: q.GetPaused(),
		}
	}
	return map[string]any{"queues": queues}, nil
}

// PauseQueue and ResumeQueue.

type restPauseRequest struct {
	Queue  string `json:"queue"`
	Reason string `json:"reason"`
}

var decodePause = fromBody(func(req *restPauseRequest) (*rdqv1.PauseQueueRequest, error) {
	return &rdqv1.PauseQueueRequest{Queue: req.Queue, Reason: req.Reason}, nil
})

func renderPause(req *rdqv1.PauseQueueRequest, _ *rdqv1.PauseQueueResponse) (any, error) {
	return map[string]any{"queue": req.GetQueue(), "paused": true}, nil
}

var decodeResume = fromBody(func(req *restPauseRequest) (*rdqv1.ResumeQueueRequest, error) {
	return &rdqv1.ResumeQueueRequest{Queue: req.Queue, Reason: req.Reason}, nil
})

func renderResume(req *rdqv1.ResumeQueueRequest, _ *rdqv1.ResumeQueueResponse) (any, error) {
	return map[string]any{"queue": req.GetQueue(), "paused": false}, nil
}
