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

// GetSeries implements rdqv1.RdqServiceServer: the attempts that finished
// per minute or hour, with their outcomes, per queue and handler, limited
// to the queues the caller may read (operator role). It needs a store that
// implements store.SeriesReader.
func (s *Service) GetSeries(ctx context.Context, req *rdqv1.GetSeriesRequest) (*rdqv1.GetSeriesResponse, error) {
	return serve(ctx, s, "GetSeries", func(c *call) (*rdqv1.GetSeriesResponse, error) {
		queue, handler := req.GetQueue(), req.GetHandler()
		for _, n := range []struct{ what, name string }{{"queue", queue}, {"handler", handler}} {
			if n.name != "" {
				if err := rdq.ValidateName(n.what, n.name); err != nil {
					return nil, err
				}
			}
		}
		if err := c.queue(queue); err != nil {
			return nil, err
		}
		var width time.Duration
		switch r := req.GetResolution(); r {
		case rdqv1.SeriesResolution_SERIES_RESOLUTION_UNSPECIFIED, rdqv1.SeriesResolution_SERIES_RESOLUTION_MINUTE:
			width = time.Minute
		case rdqv1.SeriesResolution_SERIES_RESOLUTION_HOUR:
			width = time.Hour
		default:
			return nil, fmt.Errorf("%w: resolution %d: use minute or hour", rdq.ErrInvalid, r)
		}
		if req.GetSince() == nil {
			return nil, fmt.Errorf("%w: series: since is required: the start of the window, at most 8 days ago", rdq.ErrInvalid)
		}
		var until time.Time
		if req.GetUntil() != nil {
			until = req.GetUntil().AsTime()
		}
		p, err := store.SeriesWindow(width, req.GetSince().AsTime(), until, time.Now())
		if err != nil {
			return nil, err
		}
		p.Queue, p.Handler = queue, handler
		series, err := s.series.Series(ctx, p)
		if err != nil {
			return nil, err
		}
		out := &rdqv1.GetSeriesResponse{Start: tsProto(series.Start), WidthSeconds: int64(series.Width / time.Second),
			PartialUntil: tsProto(series.PartialUntil)}
		for _, l := range series.Lines {
			if !c.sees(l.Queue) {
				continue
			}
			line := &rdqv1.SeriesLine{Queue: l.Queue, Handler: l.Handler, Counts: make([]*rdqv1.SeriesCounts, len(l.Counts))}
			for i, n := range l.Counts {
				line.Counts[i] = &rdqv1.SeriesCounts{Attempts: n.Attempts, Successes: n.Successes, Retryable: n.Retryable,
					Permanent: n.Permanent, DeadLettered: n.DeadLettered}
			}
			out.Lines = append(out.Lines, line)
		}
		return out, nil
	})
}

type restSeriesCounts struct {
	Start        time.Time `json:"start"`
	Attempts     int64     `json:"attempts"`
	Successes    int64     `json:"successes"`
	Retryable    int64     `json:"retryable"`
	Permanent    int64     `json:"permanent"`
	DeadLettered int64     `json:"dead_lettered"`
}

type restSeriesLine struct {
	Queue   string             `json:"queue"`
	Handler string             `json:"handler"`
	Buckets []restSeriesCounts `json:"buckets"`
}

func decodeGetSeries(_ *Service, r *http.Request) (*rdqv1.GetSeriesRequest, error) {
	q := r.URL.Query()
	req := &rdqv1.GetSeriesRequest{Queue: q.Get("queue"), Handler: q.Get("handler")}
	switch res := q.Get("resolution"); res {
	case "", "minute":
		req.Resolution = rdqv1.SeriesResolution_SERIES_RESOLUTION_MINUTE
	case "hour":
		req.Resolution = rdqv1.SeriesResolution_SERIES_RESOLUTION_HOUR
	default:
		return nil, errorf(CodeInvalidArgument, fmt.Sprintf("resolution %q: use minute or hour", res))
	}
	var err error
	if req.Since, err = parseTime("since", q.Get("since")); err != nil {
		return nil, err
	}
	if req.Until, err = parseTime("until", q.Get("until")); err != nil {
		return nil, err
	}
	return req, nil
}

func renderGetSeries(_ *rdqv1.GetSeriesRequest, res *rdqv1.GetSeriesResponse) (any, error) {
	start, width := res.GetStart().AsTime().UTC(), time.Duration(res.GetWidthSeconds())*time.Second
	lines := make([]restSeriesLine, 0, len(res.GetLines()))
	for _, l := range res.GetLines() {
		rl := restSeriesLine{Queue: l.GetQueue(), Handler: l.GetHandler(), Buckets: make([]restSeriesCounts, len(l.GetCounts()))}
		for i, n := range l.GetCounts() {
			rl.Buckets[i] = restSeriesCounts{Start: start.Add(time.Duration(i) * width), Attempts: n.GetAttempts(),
				Successes: n.GetSuccesses(), Retryable: n.GetRetryable(), Permanent: n.GetPermanent(), DeadLettered: n.GetDeadLettered()}
		}
		lines = append(lines, rl)
	}
	out := map[string]any{"start": start, "width_seconds": res.GetWidthSeconds(), "lines": lines}
	if res.GetPartialUntil() != nil {
		out["partial_until"] = res.GetPartialUntil().AsTime().UTC()
	}
	return out, nil
}
