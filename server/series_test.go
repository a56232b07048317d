package server_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/proto/rdqv1"
	"github.com/srjn45/rdq/store"
)

// GET /v1/series and GetSeries count the attempts per minute or hour,
// limited to the queues the caller may read.
func TestGetSeries(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var tasks []store.NewTask
	for _, q := range []string{"fail500", "fail500", "series-only"} {
		tasks = append(tasks, store.NewTask{ID: rdq.NewID(), Queue: q, Handler: "h",
			FirstFailure: &store.AttemptRecord{Outcome: rdq.OutcomePermanentFailure, Failure: rdq.Failure{Type: "x", Message: "y", Fingerprint: rdq.Fingerprint("x", "y")}}})
	}
	if _, err := e.st.Enqueue(ctx, store.EnqueueParams{Tasks: tasks}); err != nil {
		t.Fatal(err)
	}
	since := time.Now().Add(-10 * time.Minute).UTC()
	type series struct {
		Start        time.Time `json:"start"`
		WidthSeconds int64     `json:"width_seconds"`
		Lines        []struct {
			Queue   string `json:"queue"`
			Handler string `json:"handler"`
			Buckets []struct {
				Start        time.Time `json:"start"`
				Attempts     int64     `json:"attempts"`
				Permanent    int64     `json:"permanent"`
				DeadLettered int64     `json:"dead_lettered"`
			} `json:"buckets"`
		} `json:"lines"`
	}
	total := func(s series, queue string) (n int64) {
		for _, l := range s.Lines {
			if l.Queue == queue && l.Handler == "h" {
				for _, b := range l.Buckets {
					n += b.DeadLettered
				}
			}
		}
		return n
	}
	q := url.Values{"since": {since.Format(time.RFC3339Nano)}}
	var all series
	e.do("GET", "/v1/series?"+q.Encode(), tokOperator, nil, &all)
	if all.WidthSeconds != 60 || len(all.Lines) == 0 || len(all.Lines[0].Buckets) != 11 || all.Start.After(since) ||
		total(all, "fail500") != 2 || total(all, "series-only") != 1 {
		t.Fatalf("GET /v1/series: %+v", all)
	}
	for i, b := range all.Lines[0].Buckets {
		if !b.Start.Equal(all.Start.Add(time.Duration(i) * time.Minute)) {
			t.Errorf("bucket %d starts %s, want %s", i, b.Start, all.Start.Add(time.Duration(i)*time.Minute))
		}
	}
	// A caller who may read only fail5* sees only those lines.
	var some series
	e.do("GET", "/v1/series?"+q.Encode(), tokOrdersOps, nil, &some)
	if total(some, "fail500") != 2 || total(some, "series-only") != 0 {
		t.Fatalf("GET /v1/series as orders-team: %+v", some)
	}
	q.Set("queue", "series-only")
	wantProblem(t, e.do("GET", "/v1/series?"+q.Encode(), tokOrdersOps, nil, nil), 403, "permission_denied")
	for _, bad := range []string{
		"/v1/series",                              // no since
		"/v1/series?since=yesterday",              // not RFC 3339
		"/v1/series?resolution=day&" + q.Encode(), // no such resolution
		"/v1/series?queue=bad%20name&since=" + url.QueryEscape(since.Format(time.RFC3339)),
		"/v1/series?since=" + url.QueryEscape(time.Now().Add(-30*24*time.Hour).Format(time.RFC3339)), // past the retention
	} {
		wantProblem(t, e.do("GET", bad, tokOperator, nil, nil), 400, "invalid_argument")
	}

	got, err := e.grpc.GetSeries(e.grpcCtx(tokOperator), &rdqv1.GetSeriesRequest{Queue: "fail500",
		Resolution: rdqv1.SeriesResolution_SERIES_RESOLUTION_HOUR, Since: timestamppb.New(time.Now().Add(-3 * time.Hour))})
	if err != nil {
		t.Fatalf("GetSeries over gRPC: %v", err)
	}
	var dead int64
	for _, l := range got.GetLines() {
		if l.GetQueue() != "fail500" || len(l.GetCounts()) != 4 {
			t.Errorf("GetSeries(fail500, hours) line %s/%s with %d buckets", l.GetQueue(), l.GetHandler(), len(l.GetCounts()))
		}
		for _, c := range l.GetCounts() {
			dead += c.GetDeadLettered()
		}
	}
	if got.GetWidthSeconds() != 3600 || dead < 2 {
		t.Fatalf("GetSeries(fail500, hours) over gRPC: %v", got)
	}
}
