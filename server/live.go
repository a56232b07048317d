package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/proto/rdqv1"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/tasks"
)

// The live-task methods (ListTasks, TaskByKey, RetryTasks, CancelTasks)
// need a store implementing store.LiveTasks and the operator role on the
// queues they touch.

func liveFilterFromProto(pf *rdqv1.TaskFilter) tasks.Filter {
	return tasks.Filter{
		Queue: pf.GetQueue(), Handler: pf.GetHandler(), ErrorType: pf.GetErrorType(),
		Fingerprint: pf.GetFingerprint(), MessageContains: pf.GetMessageContains(),
	}
}

// ListTasks implements rdqv1.RdqServiceServer.
func (s *Service) ListTasks(ctx context.Context, req *rdqv1.ListTasksRequest) (*rdqv1.ListTasksResponse, error) {
	return serve(ctx, s, "ListTasks", func(c *call) (*rdqv1.ListTasksResponse, error) {
		f := liveFilterFromProto(req.GetFilter())
		if err := f.Validate(); err != nil {
			return nil, err
		}
		if err := c.queue(f.Queue); err != nil {
			return nil, err
		}
		page, err := s.live.List(ctx, store.TaskState(req.GetState()), f, tasks.ListOptions{PageSize: int(req.GetPageSize()), PageToken: req.GetPageToken()})
		if err != nil {
			return nil, err
		}
		out := &rdqv1.ListTasksResponse{NextPageToken: page.NextPageToken, Tasks: make([]*rdqv1.Task, len(page.Tasks))}
		for i, t := range page.Tasks {
			out.Tasks[i] = TaskToProto(t, false)
		}
		return out, nil
	})
}

// TaskByKey implements rdqv1.RdqServiceServer.
func (s *Service) TaskByKey(ctx context.Context, req *rdqv1.TaskByKeyRequest) (*rdqv1.TaskByKeyResponse, error) {
	return serve(ctx, s, "TaskByKey", func(c *call) (*rdqv1.TaskByKeyResponse, error) {
		if err := rdq.ValidateName("queue", req.GetQueue()); err != nil {
			return nil, err
		}
		if err := c.queue(req.GetQueue()); err != nil {
			return nil, err
		}
		t, err := s.live.ByKey(ctx, req.GetQueue(), req.GetKey())
		if errors.Is(err, store.ErrNotFound) {
			return nil, errorf(CodeNotFound, fmt.Sprintf("no task holds that idempotency key in queue %q", req.GetQueue()))
		}
		if err != nil {
			return nil, err
		}
		d, err := s.live.Show(ctx, t.ID)
		if err != nil {
			return nil, err
		}
		return &rdqv1.TaskByKeyResponse{Task: TaskToProto(d.Task, true), History: attemptsToProto(d.Attempts)}, nil
	})
}

// RetryTasks implements rdqv1.RdqServiceServer.
func (s *Service) RetryTasks(ctx context.Context, req *rdqv1.ChangeTasksRequest) (*rdqv1.ChangeTasksResponse, error) {
	return serve(ctx, s, "RetryTasks", func(c *call) (*rdqv1.ChangeTasksResponse, error) {
		return s.changeTasks(ctx, c, req, s.live.RetryNow)
	})
}

// CancelTasks implements rdqv1.RdqServiceServer.
func (s *Service) CancelTasks(ctx context.Context, req *rdqv1.ChangeTasksRequest) (*rdqv1.ChangeTasksResponse, error) {
	return serve(ctx, s, "CancelTasks", func(c *call) (*rdqv1.ChangeTasksResponse, error) {
		return s.changeTasks(ctx, c, req, s.live.Cancel)
	})
}

// changeTasks applies change to the tasks req names, for the caller of c.
func (s *Service) changeTasks(ctx context.Context, c *call, req *rdqv1.ChangeTasksRequest,
	change func(context.Context, []rdq.ID, tasks.Change) ([]error, error)) (*rdqv1.ChangeTasksResponse, error) {
	if len(req.GetIds()) == 0 || len(req.GetIds()) > tasks.MaxIDs {
		return nil, errorf(CodeInvalidArgument, fmt.Sprintf("ids names %d tasks: name 1 to %d", len(req.GetIds()), tasks.MaxIDs))
	}
	ids := make([]rdq.ID, len(req.GetIds()))
	for i, raw := range req.GetIds() {
		var err error
		if ids[i], err = rdq.ParseID(raw); err != nil {
			return nil, fmt.Errorf("ids[%d]: %w", i, err)
		}
	}
	n, err := c.tasks(ctx, ids)
	if err != nil {
		return nil, err
	}
	errs, err := change(ctx, n.act, tasks.Change{Actor: c.p.Name, Reason: req.GetReason()})
	if err != nil {
		return nil, err
	}
	out := &rdqv1.ChangeTasksResponse{Results: make([]*rdqv1.ChangeTaskResult, len(ids))}
	for i, id := range ids {
		out.Results[i] = &rdqv1.ChangeTaskResult{Id: id.String()}
		if errs[i] == nil {
			out.Changed++
			continue
		}
		out.Results[i].Error = n.item(i, errs[i])
	}
	return out, nil
}

// REST forms.

func decodeListTasks(_ *Service, r *http.Request) (*rdqv1.ListTasksRequest, error) {
	q := r.URL.Query()
	size, err := parseInt("page_size", q.Get("page_size"), 32)
	if err != nil {
		return nil, err
	}
	return &rdqv1.ListTasksRequest{
		State: q.Get("state"),
		Filter: &rdqv1.TaskFilter{
			Queue: q.Get("queue"), Handler: q.Get("handler"), ErrorType: q.Get("error_type"),
			Fingerprint: q.Get("fingerprint"), MessageContains: q.Get("message_contains"),
		},
		PageSize: int32(size), PageToken: q.Get("page_token"),
	}, nil
}

func renderListTasks(_ *rdqv1.ListTasksRequest, res *rdqv1.ListTasksResponse) (any, error) {
	tasks, err := envelopesJSON(res.GetTasks())
	if err != nil {
		return nil, err
	}
	return restTaskPage{tasks, res.GetNextPageToken()}, nil
}

func decodeTaskByKey(_ *Service, r *http.Request) (*rdqv1.TaskByKeyRequest, error) {
	q := r.URL.Query()
	return &rdqv1.TaskByKeyRequest{Queue: q.Get("queue"), Key: q.Get("key")}, nil
}

type restChangeRequest struct {
	IDs    []string `json:"ids"`
	Reason string   `json:"reason"`
}

type restChangeResult struct {
	ID    string     `json:"id"`
	Error *restError `json:"error,omitempty"`
}

var decodeChange = fromBody(func(req *restChangeRequest) (*rdqv1.ChangeTasksRequest, error) {
	return &rdqv1.ChangeTasksRequest{Ids: req.IDs, Reason: req.Reason}, nil
})

func renderChange(_ *rdqv1.ChangeTasksRequest, res *rdqv1.ChangeTasksResponse) (any, error) {
	out := struct {
		Changed int64              `json:"changed"`
		Results []restChangeResult `json:"results"`
	}{Changed: res.GetChanged(), Results: make([]restChangeResult, len(res.GetResults()))}
	for i, item := range res.GetResults() {
		out.Results[i] = restChangeResult{ID: item.GetId(), Error: restErr(item.GetError())}
	}
	return out, nil
}
