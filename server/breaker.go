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

// ListBreakers implements rdqv1.RdqServiceServer: the paused handlers of
// the queues the caller may read (operator role), with their circuit
// breaker state. A store without store.HandlerPauser has none to list.
func (s *Service) ListBreakers(ctx context.Context, req *rdqv1.ListBreakersRequest) (*rdqv1.ListBreakersResponse, error) {
	return serve(ctx, s, "ListBreakers", func(c *call) (*rdqv1.ListBreakersResponse, error) {
		if q := req.GetQueue(); q != "" {
			if err := rdq.ValidateName("queue", q); err != nil {
				return nil, err
			}
		}
		if err := c.queue(req.GetQueue()); err != nil {
			return nil, err
		}
		out := &rdqv1.ListBreakersResponse{}
		if s.handlers == nil {
			return out, nil
		}
		paused, err := s.handlers.PausedHandlers(ctx, req.GetQueue())
		if err != nil {
			return nil, err
		}
		for _, b := range paused {
			if !c.sees(b.Queue) {
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
	})
}

// SetBreaker implements rdqv1.RdqServiceServer: it forces one handler's
// circuit breaker open or closed, audited with the caller as the actor. It
// needs the admin role on the queue and a store that implements
// store.HandlerPauser.
func (s *Service) SetBreaker(ctx context.Context, req *rdqv1.SetBreakerRequest) (*rdqv1.SetBreakerResponse, error) {
	return serve(ctx, s, "SetBreaker", func(c *call) (*rdqv1.SetBreakerResponse, error) {
		queue, handler := req.GetQueue(), req.GetHandler()
		if err := rdq.ValidateName("queue", queue); err != nil {
			return nil, err
		}
		if err := rdq.ValidateName("handler", handler); err != nil {
			return nil, err
		}
		coolOff, err := millis("cool_off_ms", req.GetCoolOffMs())
		if err != nil {
			return nil, err
		}
		state := req.GetState()
		if state != "open" && state != "closed" {
			return nil, fmt.Errorf("%w: state %q: want \"open\" or \"closed\"", rdq.ErrInvalid, rdq.Truncate(state, 40))
		}
		if err := c.queue(queue); err != nil {
			return nil, err
		}
		var changed bool
		if state == "open" {
			changed, err = s.handlers.PauseHandler(ctx, store.PauseHandlerParams{Queue: queue, Handler: handler, CoolOff: coolOff, Actor: c.p.Name, Reason: req.GetReason()})
		} else {
			changed, err = s.handlers.ResumeHandler(ctx, store.ResumeHandlerParams{Queue: queue, Handler: handler, Actor: c.p.Name, Reason: req.GetReason()})
		}
		if err != nil {
			return nil, err
		}
		s.log.InfoContext(ctx, "circuit breaker forced "+state, "queue", queue, "handler", handler, "actor", c.p.Name, "changed", changed)
		return &rdqv1.SetBreakerResponse{Changed: changed}, nil
	})
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

func decodeListBreakers(_ *Service, r *http.Request) (*rdqv1.ListBreakersRequest, error) {
	return &rdqv1.ListBreakersRequest{Queue: r.URL.Query().Get("queue")}, nil
}

func renderListBreakers(_ *rdqv1.ListBreakersRequest, res *rdqv1.ListBreakersResponse) (any, error) {
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

var decodeSetBreaker = fromBody(func(req *restSetBreakerRequest) (*rdqv1.SetBreakerRequest, error) {
	return &rdqv1.SetBreakerRequest{Queue: req.Queue, Handler: req.Handler, State: req.State,
		CoolOffMs: req.CoolOffMs, Reason: req.Reason}, nil
})

func renderSetBreaker(req *rdqv1.SetBreakerRequest, res *rdqv1.SetBreakerResponse) (any, error) {
	return map[string]any{"queue": req.GetQueue(), "handler": req.GetHandler(), "state": req.GetState(), "changed": res.GetChanged()}, nil
}
