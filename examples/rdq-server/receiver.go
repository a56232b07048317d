package main

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/srjn45/rdq/callback"
)

// startDemoReceiver serves a callback endpoint on addr that stands in for
// the services a real deployment calls back: it accepts only requests
// signed with secret (callback.VerifyHandler), fails with 500 when the
// payload contains "fail": true, so the dead-letter queue can be tried out,
// and succeeds otherwise. It logs task ids, never payloads.
func startDemoReceiver(addr string, secret []byte, log *slog.Logger) (stop func(), err error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	h := callback.VerifyHandler(secret, 5*time.Minute, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m, ok := callback.MessageFrom(r.Context())
		if !ok {
			http.Error(w, "no verified message", http.StatusInternalServerError)
			return
		}
		d := m.Data
		attrs := []any{"task_id", d.ID, "queue", d.Queue, "handler", d.Handler, "attempt", d.Attempt}
		if bytes.Contains(bytes.ReplaceAll(d.Body(), []byte(" "), nil), []byte(`"fail":true`)) {
			log.Info("demo receiver: failing on request", attrs...)
			http.Error(w, "demo receiver: the payload asked to fail", http.StatusInternalServerError)
			return
		}
		log.Info("demo receiver: done", attrs...)
		w.WriteHeader(http.StatusNoContent)
	}))
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
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
	}, nil
}
