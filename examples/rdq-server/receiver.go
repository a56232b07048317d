package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/srjn45/rdq/callback"
)

// demoReceiver stands in for the services a real deployment calls back: it
// fails when the payload contains "fail": true, so that the dead-letter
// queue can be tried out, and succeeds otherwise. It logs task ids, never
// payloads.
func demoReceiver(log *slog.Logger) callback.ReceiverFunc {
	return func(_ context.Context, m *callback.Message) error {
		d := m.Data
		attrs := []any{"task_id", d.ID, "queue", d.Queue, "handler", d.Handler, "attempt", d.Attempt}
		if bytes.Contains(bytes.ReplaceAll(d.Body(), []byte(" "), nil), []byte(`"fail":true`)) {
			log.Info("demo receiver: failing on request", attrs...)
			return demoFailure{}
		}
		log.Info("demo receiver: done", attrs...)
		return nil
	}
}

// demoFailure is the demo receiver's failure; the attempt history shows
// its type and message.
type demoFailure struct{}

func (demoFailure) Error() string     { return "demo receiver: the payload asked to fail" }
func (demoFailure) ErrorType() string { return "demo_failure" }

// startDemoReceiver serves demoReceiver on lis, admitting only callbacks
// signed with secret (callback.Receiver), until stop is called.
func startDemoReceiver(lis net.Listener, secret []byte, log *slog.Logger) (stop func()) {
	srv := &http.Server{Handler: callback.Receiver(secret, callback.DefaultMaxSkew, demoReceiver(log)), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("demo receiver stopped", "error", err)
		}
	}()
	log.Info("demo receiver listening", "addr", lis.Addr().String())
	return func() {
		if err := srv.Close(); err != nil {
			log.Error("closing the demo receiver", "error", err)
		}
	}
}
