package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/proto/rdqv1"
	"github.com/srjn45/rdq/store"
)

// handlerPauser returns the store as a store.HandlerPauser, or an
// unimplemented error.
func (s *Service) handlerPauser() (store.HandlerPauser, error) {
	hp, ok := store.HandlerPauserOf(s.store)
	if !ok {
		return nil, errorf(CodeUnimplemented, "the store cannot pause handlers (it does not implement store.HandlerPauser)")
	}
	return hp, nil
}

// ListBreakers implements rdqv1.RdqServiceServer: the paused handlers of
// the queues the caller may read (operator role), with their circuit
// breaker state. A store without store.HandlerPauser has none to list.
func (s *Service) ListBreakers(ctx context.Context, req *rdqv1.ListBreakersRequest) (*rdqv1.ListBreakersResponse, error) {
	const method = "ListBreakers"
	p, err := s.principal(ctx)
	if err != nil {
		return nil, err
	}
	if q := req.GetQueue(); q != "" {
		if err := rdq.ValidateName("queue", q); err != nil {
			return nil, s.fail(ctx, method, err)
		}
		if !p.Can(RoleOperator, q) {
			return nil, denied(p, RoleOperator, q)
		}
	}
	out := &rdqv1.ListBreakersResponse{}
	hp, ok := store.HandlerPauserOf(s.store)
	if !ok {
		return out, nil
	}
	paused, err := hp.PausedHandlers(ctx, req.GetQueue())
	if err != nil {
		return nil, s.fail(ctx, method, err)
	}
	for _, b := range paused {
		if !p.Can(RoleOperator, b.Queue) {
			continue
		}
		pb := &rdqv1.Breaker{
			Queue: b.Queue, Handler: b.Handler, State: string(b.State), Since: tsProto(b.Since),
			ProbeAt: tsProto(b.ProbeAt), Trips: int32(b.Trips), Actor: b.Actor, Reason: b.Reason,
			Fingerprint: b.Fingerprint, FailureRatio: b.Ratio,
		}
		if !b.Probe.ID.IsZero() {
			pb.ProbeTaskId = b.Probe.ID.String()
		}
		out.Breakers = append(out.Breakers, pb)
	}
	return out, nil
}

// SetBreaker implements rdqv1.RdqServiceServer: it forces one handler's
// circuit breaker open or closed, audited with the caller as the actor. It
// needs the admin role on the queue and a store that implements
// store.HandlerPauser.
func (s *Service) SetBreaker(ctx context.Context, req *rdqv1.SetBreakerRequest) (*rdqv1.SetBreakerResponse, error) {
	const method = "SetBreaker"
	p, err := s.principal(ctx)
	if err != nil {
		return nil, err
	}
	queue, handler := req.GetQueue(), req.GetHandler()
	if err := rdq.ValidateName("queue", queue); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	if err := rdq.ValidateName("handler", handler); err != nil {
		return nil, s.fail(ctx, method, err)
	}
	coolOff, err := millis("cool_off_ms", req.GetCoolOffMs())
	if err != nil {
		return nil, s.fail(ctx, method, err)
	}
	state := req.GetState()
	if state != "open" && state != "closed" {
		return nil, s.fail(ctx, method, fmt.Errorf("%w: state %q: want \"open\" or \"closed\"", rdq.ErrInvalid, rdq.Truncate(state, 40)))
	}
	if !p.Can(RoleAdmin, queue) {
		return nil, denied(p, RoleAdmin, queue)
	}
	hp, err := s.handlerPauser()
	if err != nil {
		return nil, err
	}
	var changed bool
	if state == "open" {
		changed, err = hp.PauseHandler(ctx, store.PauseHandlerParams{Queue: queue, Handler: handler, CoolOff: coolOff, Actor: p.Name, Reason: req.GetReason()})
	} else {
		changed, err = hp.ResumeHandler(ctx, store.ResumeHandlerParams{Queue: queue, Handler: handler, Actor: p.Name, Reason: req.GetReason()})
	}
	if err != nil {
		return nil, s.fail(ctx, method, err)
	}
	s.log.InfoContext(ctx, "circuit breaker forced "+state, "queue", queue, "handler", handler, "actor", p.Name, "changed", changed)
	return &rdqv1.SetBreakerResponse{Changed: changed}, nil
}

type restBreaker struct {
	Queue        string    `json:"queue"`
	Handler      string    `json:"handler"`
	State        string    `json:"state"`
	Since        time.Time `json:"since"`
	ProbeAt      time.Time `json:"probe_at,omitzero"`
	Trips        int32     `json:"trips"`
	ProbeTaskID  string    `json:"probe_task_id,omitempty"`
	Actor        string    `json:"actor"`
	Reason       string    `json:"reason"`
	Fingerprint  string    `json:"fingerprint,omitempty"`
	FailureRatio float64   `json:"failure_ratio,omitempty"`
}

func (s *Service) restListBreakers(ctx context.Context, r *http.Request) (any, error) {
	res, err := s.ListBreakers(ctx, &rdqv1.ListBreakersRequest{Queue: r.URL.Query().Get("queue")})
	if err != nil {
		return nil, err
	}
	out := make([]restBreaker, len(res.GetBreakers()))
	for i, b := range res.GetBreakers() {
		out[i] = restBreaker{
			Queue: b.GetQueue(), Handler: b.GetHandler(), State: b.GetState(), Since: b.GetSince().AsTime().UTC(),
			Trips: b.GetTrips(), ProbeTaskID: b.GetProbeTaskId(), Actor: b.GetActor(), Reason: b.GetReason(),
			Fingerprint: b.GetFingerprint(), FailureRatio: b.GetFailureRatio(),
		}
		if b.GetProbeAt() != nil {
			out[i].ProbeAt = b.GetProbeAt().AsTime().UTC()
		}
	}
	return map[string]any{"breakers": out}, nil
}

type restSetBreakerRequest struct {
	Queue     string `json:"queue"`
	Handler   string `json:"handler"`
	State     string `json:"state"`
	CoolOffMs int64  `json:"cool_off_ms"`
	Reason    string `json:"reason"`
}

func (s *Service) restSetBreaker(ctx context.Context, r *http.Request) (any, error) {
	var req restSetBreakerRequest
	if err := s.decodeJSON(r, &req); err != nil {
		return nil, err
	}
	res, err := s.SetBreaker(ctx, &rdqv1.SetBreakerRequest{Queue: req.Queue, Handler: req.Handler, State: req.State,
		CoolOffMs: req.CoolOffMs, Reason: req.Reason})
	if err != nil {
		return nil, err
	}
	return map[string]any{"queue": req.Queue, "handler": req.Handler, "state": req.State, "changed": res.GetChanged()}, nil
}
