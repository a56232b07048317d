package server

import (
	"context"
	"net/http"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/proto/rdqv1"
	"github.com/srjn45/rdq/store"
)

// ListWorkers implements rdqv1.RdqServiceServer: the registered workers and
// the waiting tasks no live worker serves, limited to the queues the caller
// may read (operator role). A worker that also runs queues the caller may
// not read has in_flight 0: its count is over all its queues. It needs a
// store that implements store.WorkerRegistry.
func (s *Service) ListWorkers(ctx context.Context, req *rdqv1.ListWorkersRequest) (*rdqv1.ListWorkersResponse, error) {
	return serve(ctx, s, "ListWorkers", func(c *call) (*rdqv1.ListWorkersResponse, error) {
		queue := req.GetQueue()
		if queue != "" {
			if err := rdq.ValidateName("queue", queue); err != nil {
				return nil, err
			}
		}
		if err := c.queue(queue); err != nil {
			return nil, err
		}
		ws, err := s.registry.Workers(ctx, store.WorkersParams{Queue: queue})
		if err != nil {
			return nil, err
		}
		var queues []string
		if queue != "" {
			queues = []string{queue}
		}
		us, err := s.registry.UnservedHandlers(ctx, store.UnservedParams{Queues: queues})
		if err != nil {
			return nil, err
		}
		out := &rdqv1.ListWorkersResponse{}
		for _, w := range ws {
			var readable []string
			for _, q := range w.Queues {
				if c.sees(q) {
					readable = append(readable, q)
				}
			}
			if len(readable) == 0 {
				continue
			}
			inFlight := int32(w.InFlight)
			if len(readable) < len(w.Queues) {
				inFlight = 0 // it counts queues the caller may not read
			}
			out.Workers = append(out.Workers, &rdqv1.WorkerInfo{
				Id: w.ID, Host: w.Host, Pid: int32(w.PID), Version: w.Version, Queues: readable, Handlers: w.Handlers,
				Slots: int32(w.Slots), InFlight: inFlight, StartedAt: tsProto(w.StartedAt),
				LastSeen: tsProto(w.LastSeen), Stale: w.Stale,
			})
		}
		for _, u := range us {
			if !c.sees(u.Queue) {
				continue
			}
			out.Unserved = append(out.Unserved, &rdqv1.UnservedHandler{
				Queue: u.Queue, Handler: u.Handler, Tasks: u.Tasks, OldestDue: tsProto(u.OldestDue),
				WaitingMs: u.Waiting.Milliseconds(),
			})
		}
		return out, nil
	})
}

type restWorker struct {
	ID        string    `json:"id"`
	Host      string    `json:"host"`
	PID       int32     `json:"pid"`
	Version   string    `json:"version"`
	Queues    []string  `json:"queues"`
	Handlers  []string  `json:"handlers"`
	Slots     int32     `json:"slots"`
	InFlight  int32     `json:"in_flight"`
	StartedAt time.Time `json:"started_at"`
	LastSeen  time.Time `json:"last_seen"`
	Stale     bool      `json:"stale"`
}

type restUnserved struct {
	Queue     string    `json:"queue"`
	Handler   string    `json:"handler"`
	Tasks     int64     `json:"tasks"`
	OldestDue time.Time `json:"oldest_due"`
	WaitingMs int64     `json:"waiting_ms"`
}

func decodeListWorkers(_ *Service, r *http.Request) (*rdqv1.ListWorkersRequest, error) {
	return &rdqv1.ListWorkersRequest{Queue: r.URL.Query().Get("queue")}, nil
}

func renderListWorkers(_ *rdqv1.ListWorkersRequest, res *rdqv1.ListWorkersResponse) (any, error) {
	workers := make([]restWorker, 0, len(res.GetWorkers()))
	for _, w := range res.GetWorkers() {
		workers = append(workers, restWorker{
			ID: w.GetId(), Host: w.GetHost(), PID: w.GetPid(), Version: w.GetVersion(), Queues: w.GetQueues(),
			Handlers: w.GetHandlers(), Slots: w.GetSlots(), InFlight: w.GetInFlight(),
			StartedAt: w.GetStartedAt().AsTime().UTC(), LastSeen: w.GetLastSeen().AsTime().UTC(), Stale: w.GetStale(),
		})
	}
	unserved := make([]restUnserved, 0, len(res.GetUnserved()))
	for _, u := range res.GetUnserved() {
		unserved = append(unserved, restUnserved{
			Queue: u.GetQueue(), Handler: u.GetHandler(), Tasks: u.GetTasks(),
			OldestDue: u.GetOldestDue().AsTime().UTC(), WaitingMs: u.GetWaitingMs(),
		})
	}
	return map[string]any{"workers": workers, "unserved": unserved}, nil
}
