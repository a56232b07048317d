package crosslang

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/client"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/worker"
)

// javaSpan is a span the Java testkit wrote to its span log.
type javaSpan struct {
	Name         string            `json:"name"`
	Kind         string            `json:"kind"`
	TraceID      string            `json:"trace_id"`
	SpanID       string            `json:"span_id"`
	ParentSpanID string            `json:"parent_span_id"`
	Attributes   map[string]string `json:"attributes"`
}

func readJavaSpans(t *testing.T, path string) []javaSpan {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []javaSpan
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var s javaSpan
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("span log line %q: %v", sc.Text(), err)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTraceContinuesFromGoToJavaAndBack: a Go span's trace continues in a
// Java worker's execution span, parented by the traceparent Go's client
// wrote, and from there in a Go worker's execution span of a task the Java
// handler submitted, parented by the Java client's submit span.
func TestTraceContinuesFromGoToJavaAndBack(t *testing.T) {
	requireJava(t)
	st, schema := pgtest.NewStore(t)
	ctx := t.Context()
	dir := t.TempDir()
	spanLog := filepath.Join(dir, "spans.jsonl")

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() {
		if err := tp.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	prop := propagation.TraceContext{}

	w, err := worker.New(worker.Config{Store: st, ID: "go-trace", Logger: slog.New(slog.DiscardHandler),
		Queues: map[string]worker.QueueConfig{"back": {}}, PollInterval: 50 * time.Millisecond,
		ReclaimInterval: worker.Disabled, PurgeInterval: worker.Disabled, TracerProvider: tp, Propagator: prop})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan rdq.ID, 1)
	w.Handle("traced", func(ctx context.Context, tk *rdq.Task) error {
		ran <- tk.ID
		return nil
	})
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(stopCtx); err != nil {
			t.Error(err)
		}
	}()

	java := startJava(t, "WorkerMain", dir, "java-trace", javaWorkerEnv(schema, "java-t", "relay", filepath.Join(dir, "exec.log"),
		"RDQ_SPAN_LOG="+spanLog))
	defer java.stop(t)
	java.waitReady(t)

	c, err := client.New(client.Config{Store: st, Propagator: prop})
	if err != nil {
		t.Fatal(err)
	}
	sctx, origin := tp.Tracer("test").Start(ctx, "go-origin")
	r, err := c.Submit(sctx, client.Task{Queue: "relay", Handler: "relay", Payload: []byte("back")})
	origin.End()
	if err != nil {
		t.Fatal(err)
	}
	oc := origin.SpanContext()

	var backID rdq.ID
	select {
	case backID = <-ran:
	case <-time.After(time.Minute):
		t.Fatalf("the task the Java handler submitted did not run on the Go worker; Java:\n%s", java.stderr())
	}

	var exec, submit javaSpan
	waitFor(t, time.Minute, "the Java spans", func() bool {
		exec, submit = javaSpan{}, javaSpan{}
		for _, s := range readJavaSpans(t, spanLog) {
			switch s.Name {
			case "rdq.execute relay":
				exec = s
			case "rdq.submit":
				submit = s
			}
		}
		return exec.Name != "" && submit.Name != ""
	})
	if exec.Kind != "CONSUMER" || exec.TraceID != oc.TraceID().String() || exec.ParentSpanID != oc.SpanID().String() {
		t.Errorf("Java's execution span %+v; want trace %s, parent %s (the Go span)", exec, oc.TraceID(), oc.SpanID())
	}
	want := map[string]string{"rdq.task_id": r.Task.ID.String(), "rdq.queue": "relay", "rdq.handler": "relay",
		"rdq.attempt": "1", "rdq.life": "0", "rdq.worker_id": "java-t", "rdq.outcome": "SUCCESS"}
	for k, v := range want {
		if exec.Attributes[k] != v {
			t.Errorf("Java's execution span: %s = %q, want %q (as Go's worker sets it)", k, exec.Attributes[k], v)
		}
	}
	if submit.Kind != "PRODUCER" || submit.TraceID != oc.TraceID().String() || submit.ParentSpanID != exec.SpanID ||
		submit.Attributes["rdq.task_id"] != backID.String() {
		t.Errorf("Java's submit span %+v; want a child of its execution span %s submitting %s", submit, exec.SpanID, backID)
	}

	var goExec sdktrace.ReadOnlySpan
	waitFor(t, time.Minute, "the Go worker's span", func() bool {
		for _, s := range rec.Ended() {
			if s.Name() == "rdq.execute traced" {
				goExec = s
				return true
			}
		}
		return false
	})
	if goExec.SpanContext().TraceID() != oc.TraceID() || goExec.Parent().SpanID().String() != submit.SpanID ||
		!goExec.Parent().IsRemote() || goExec.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("Go's execution span: trace %s parent %s; want trace %s parent %s (Java's submit span)",
			goExec.SpanContext().TraceID(), goExec.Parent().SpanID(), oc.TraceID(), submit.SpanID)
	}
}
