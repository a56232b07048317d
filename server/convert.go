package server

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/dlq"
	"github.com/srjn45/rdq/proto/rdqv1"
	"github.com/srjn45/rdq/store"
)

// Conversions between the library's types and the contract's messages.

func tsProto(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func tsTime(ts *timestamppb.Timestamp) (time.Time, error) {
	if ts == nil {
		return time.Time{}, nil
	}
	if err := ts.CheckValid(); err != nil {
		return time.Time{}, fmt.Errorf("%w: %v", rdq.ErrInvalid, err)
	}
	return ts.AsTime(), nil
}

// TaskToProto converts a task; withPayload false leaves the payload out (for
// listings).
func TaskToProto(t *rdq.Task, withPayload bool) *rdqv1.Task {
	if t == nil {
		return nil
	}
	pt := &rdqv1.Task{
		Id:             t.ID.String(),
		Queue:          t.Queue,
		Handler:        t.Handler,
		ContentType:    t.ContentType,
		Headers:        t.Headers,
		IdempotencyKey: t.IdempotencyKey,
		Status:         string(t.Status),
		Attempts:       int32(t.Attempts),
		Life:           int32(t.Life),
		NextAttemptAt:  tsProto(t.NextAttemptAt),
		LeaseToken:     t.LeaseToken,
		LeaseExpiresAt: tsProto(t.LeaseExpiresAt),
		LeaseOwner:     t.LeaseOwner,
		CreatedAt:      tsProto(t.CreatedAt),
		UpdatedAt:      tsProto(t.UpdatedAt),
		FinishedAt:     tsProto(t.FinishedAt),
		MaxAttempts:    int32(t.MaxAttempts),
		TimeoutMs:      t.Timeout.Milliseconds(),
		Snoozes:        int32(t.Snoozes),
	}
	if withPayload {
		pt.Payload = t.Payload
	}
	if !t.LastError.IsZero() {
		pt.LastError = &rdqv1.ErrorSummary{Type: t.LastError.Type, Message: t.LastError.Message, Fingerprint: t.LastError.Fingerprint}
	}
	return pt
}

// TaskFromProto converts a task message back; a malformed ID is an error
// wrapping rdq.ErrInvalid.
func TaskFromProto(pt *rdqv1.Task) (*rdq.Task, error) {
	id, err := rdq.ParseID(pt.GetId())
	if err != nil {
		return nil, err
	}
	t := &rdq.Task{
		ID:             id,
		Queue:          pt.GetQueue(),
		Handler:        pt.GetHandler(),
		Payload:        pt.GetPayload(),
		ContentType:    pt.GetContentType(),
		Headers:        pt.GetHeaders(),
		IdempotencyKey: pt.GetIdempotencyKey(),
		Status:         rdq.Status(pt.GetStatus()),
		Attempts:       int(pt.GetAttempts()),
		Life:           int(pt.GetLife()),
		LeaseToken:     pt.GetLeaseToken(),
		LeaseOwner:     pt.GetLeaseOwner(),
		MaxAttempts:    int(pt.GetMaxAttempts()),
		Timeout:        time.Duration(pt.GetTimeoutMs()) * time.Millisecond,
		Snoozes:        int(pt.GetSnoozes()),
	}
	for _, f := range []struct {
		dst *time.Time
		src *timestamppb.Timestamp
	}{
		{&t.NextAttemptAt, pt.GetNextAttemptAt()},
		{&t.LeaseExpiresAt, pt.GetLeaseExpiresAt()},
		{&t.CreatedAt, pt.GetCreatedAt()},
		{&t.UpdatedAt, pt.GetUpdatedAt()},
		{&t.FinishedAt, pt.GetFinishedAt()},
	} {
		if *f.dst, err = tsTime(f.src); err != nil {
			return nil, err
		}
	}
	if e := pt.GetLastError(); e != nil {
		t.LastError = rdq.ErrorSummary{Type: e.GetType(), Message: e.GetMessage(), Fingerprint: e.GetFingerprint()}
	}
	return t, nil
}

// AttemptToProto converts an attempt.
func AttemptToProto(a rdq.Attempt) *rdqv1.Attempt {
	return &rdqv1.Attempt{
		Number:     int32(a.Number),
		Life:       int32(a.Life),
		Outcome:    string(a.Outcome),
		ErrorType:  a.ErrorType,
		Message:    a.Message,
		Stack:      a.Stack,
		WorkerId:   a.WorkerID,
		LeaseToken: a.LeaseToken,
		StartedAt:  tsProto(a.StartedAt),
		FinishedAt: tsProto(a.FinishedAt),
	}
}

// AttemptFromProto converts an attempt message of task id back.
func AttemptFromProto(id rdq.ID, pa *rdqv1.Attempt) (rdq.Attempt, error) {
	a := rdq.Attempt{
		TaskID:     id,
		Number:     int(pa.GetNumber()),
		Life:       int(pa.GetLife()),
		Outcome:    rdq.Outcome(pa.GetOutcome()),
		ErrorType:  pa.GetErrorType(),
		Message:    pa.GetMessage(),
		Stack:      pa.GetStack(),
		WorkerID:   pa.GetWorkerId(),
		LeaseToken: pa.GetLeaseToken(),
	}
	var err error
	if a.StartedAt, err = tsTime(pa.GetStartedAt()); err != nil {
		return a, err
	}
	if a.FinishedAt, err = tsTime(pa.GetFinishedAt()); err != nil {
		return a, err
	}
	return a, nil
}

func attemptsToProto(as []rdq.Attempt) []*rdqv1.Attempt {
	out := make([]*rdqv1.Attempt, len(as))
	for i, a := range as {
		out[i] = AttemptToProto(a)
	}
	return out
}

func filterFromProto(f *rdqv1.DeadFilter) (dlq.Filter, error) {
	if f == nil {
		return dlq.Filter{}, nil
	}
	out := dlq.Filter{
		Queue:           f.GetQueue(),
		Handler:         f.GetHandler(),
		ErrorType:       f.GetErrorType(),
		Fingerprint:     f.GetFingerprint(),
		MessageContains: f.GetMessageContains(),
		LifeMin:         int(f.GetLifeMin()),
		LifeBelow:       int(f.GetLifeBelow()),
	}
	var err error
	if out.DeadAfter, err = tsTime(f.GetDeadAfter()); err != nil {
		return out, err
	}
	if out.DeadBefore, err = tsTime(f.GetDeadBefore()); err != nil {
		return out, err
	}
	return out, nil
}

func parseIDs(ids []string) ([]rdq.ID, error) {
	out := make([]rdq.ID, len(ids))
	for i, s := range ids {
		id, err := rdq.ParseID(s)
		if err != nil {
			return nil, fmt.Errorf("ids[%d]: %w", i, err)
		}
		if id.IsZero() {
			return nil, fmt.Errorf("%w: ids[%d] is the zero UUID", rdq.ErrInvalid, i)
		}
		out[i] = id
	}
	return out, nil
}

func groupToProto(g store.Group) *rdqv1.Group {
	return &rdqv1.Group{
		Fingerprint: g.Fingerprint,
		ErrorType:   g.ErrorType,
		Message:     g.Message,
		Count:       g.Count,
		FirstSeen:   tsProto(g.FirstSeen),
		LastSeen:    tsProto(g.LastSeen),
		ExampleId:   g.ExampleID.String(),
	}
}

func auditToProto(e store.AuditEntry) *rdqv1.AuditEntry {
	ids := make([]string, len(e.IDs))
	for i, id := range e.IDs {
		ids[i] = id.String()
	}
	return &rdqv1.AuditEntry{
		Id:      e.ID,
		At:      tsProto(e.At),
		Actor:   e.Actor,
		Action:  e.Action,
		Filter:  e.Filter,
		Ids:     ids,
		Count:   e.Count,
		Reason:  e.Reason,
		Details: e.Details,
		Queues:  e.Queues,
	}
}
