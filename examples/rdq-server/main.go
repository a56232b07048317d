// Command rdq-server runs rdq as a network service: tasks are submitted over
// REST/JSON (/v1/...) or gRPC (rdq.v1.RdqService, on its own port), each
// queue's handler is an HTTP callback or a gRPC handler (a queue url
// grpcs://host:port), and the dead-letter queue is operated over the same
// API. It is glue around the library: package server (API, auth, metrics),
// package server/serverconfig (the configuration file), package callback
// (signed HTTP callbacks and their receiver), package callback/grpccall
// (gRPC handlers), package worker and a store.
//
//	go run ./examples/rdq-server -dev                    # sample config, embedded store
//	RDQ_DATABASE_URL=postgres://... go run ./examples/rdq-server -config my.json
//
// The sample config.json holds "change-me" tokens and callback secret,
// which anyone can read: the server refuses to start with them unless -dev
// is given (set real ones through the *_env variables the file names).
//
// Endpoints: REST and /healthz, /readyz, /metrics on "listen" (or the last
// three on "ops_listen" when it is set); gRPC on "grpc_listen" (a separate
// port, so each protocol keeps its own server, limits and timeouts). Each
// listener keeps at most "max_connections" connections open. With
// tls_cert_file and tls_key_file REST and gRPC serve TLS. With
// "metrics_token" (or "metrics_token_env") /metrics needs that bearer
// token; "console_trusted_origins" lists the console's public origins
// behind a TLS-terminating proxy, and "console_client_header" with
// "console_trusted_proxies" names its clients behind proxies (for the
// sign-in throttle and the log).
// SIGINT or SIGTERM stops intake, lets running callbacks finish (up to
// -grace) and exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/reflection"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/callback"
	"github.com/srjn45/rdq/callback/grpccall"
	"github.com/srjn45/rdq/server"
	"github.com/srjn45/rdq/server/serverconfig"
	"github.com/srjn45/rdq/storeurl"
	"github.com/srjn45/rdq/worker"
)

func main() {
	var flags serverconfig.Flags
	flags.Register(flag.CommandLine, "examples/rdq-server/config.json")
	grace := flag.Duration("grace", 30*time.Second, "how long running callbacks may finish at shutdown")
	verbose := flag.Bool("v", false, "log at debug level")
	flag.Parse()
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	cfg, err := flags.Load(log)
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		err = run(ctx, cfg, *grace, log)
		stop()
	}
	if err != nil {
		log.Error("rdq-server failed", "error", err)
		os.Exit(1)
	}
}

// run serves cfg until ctx ends or a listener fails.
func run(ctx context.Context, cfg *serverconfig.File, grace time.Duration, log *slog.Logger) error {
	st, closeStore, err := openStore(ctx, cfg.DatabaseURL, log)
	if err != nil {
		return err
	}
	defer closeStore()

	// Handlers: one router sends each task to its queue's HTTP callback
	// or gRPC handler; the worker runs it under every handler name the
	// queues declare.
	caller, err := callback.New(cfg.CallbackConfig())
	if err != nil {
		return err
	}
	defer caller.Close()
	httpRoute, err := caller.Router(cfg.Targets())
	if err != nil {
		return err
	}
	grpcConfig, err := cfg.GRPCConfig()
	if err != nil {
		return err
	}
	grpcCaller, err := grpccall.New(grpcConfig)
	if err != nil {
		return err
	}
	// Closed after the worker has stopped (deferred calls run last first).
	defer func() {
		if err := grpcCaller.Close(); err != nil {
			log.Warn("closing the connections to gRPC handlers", "error", err)
		}
	}()
	grpcTargets := cfg.GRPCTargets()
	grpcRoute, err := grpcCaller.Router(grpcTargets)
	if err != nil {
		return err
	}
	route := func(ctx context.Context, t *rdq.Task) error {
		if _, ok := grpcTargets[t.Queue]; ok {
			return grpcRoute(ctx, t)
		}
		return httpRoute(ctx, t)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))

	w, err := worker.New(worker.Config{Store: st, ID: cfg.WorkerID, Logger: log, Queues: cfg.WorkerQueues(), Metrics: reg})
	if err != nil {
		return err
	}
	for _, h := range cfg.Handlers() {
		if err := w.Handle(h, route); err != nil {
			return fmt.Errorf("config: %w", err)
		}
	}

	tokens, err := cfg.Tokens()
	if err != nil {
		return err
	}
	svc, err := server.New(server.Config{
		Store: st, Auth: tokens, Queues: cfg.QueueHandlers(), Logger: log, Metrics: reg, Gatherer: reg,
		MetricsToken: cfg.MetricsToken,
	})
	if err != nil {
		return err
	}

	if cfg.DemoReceiver != "" {
		lis, err := net.Listen("tcp", cfg.DemoReceiver)
		if err != nil {
			return err
		}
		stopReceiver := startDemoReceiver(lis, []byte(cfg.Callback.Secret), log)
		defer stopReceiver()
	}

	if err := w.Start(ctx); err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), grace+5*time.Second)
		defer cancel()
		if err := w.Stop(sctx); err != nil {
			log.Error("stopping the worker", "error", err)
		}
	}()

	// REST on one listener, gRPC on another, and the ops endpoints on a
	// third if so configured; the DLQ console at /console/ (sign in with a
	// token) beside the REST API.
	handler := svc.Handler()
	if cfg.OpsListen != "" {
		handler = svc.APIHandler()
	}
	consoleCfg, err := cfg.ConsoleConfig()
	if err != nil {
		return err
	}
	consoleHandler, err := svc.Console(consoleCfg)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle(server.DefaultConsolePrefix+"/", consoleHandler)
	mux.Handle("/", handler)
	httpSrv := &http.Server{
		Addr:              cfg.Listen,
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      server.DefaultRequestTimeout + 15*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	var grpcOpts []grpc.ServerOption
	tlsOn := cfg.TLSCertFile != ""
	if tlsOn {
		creds, err := credentials.NewServerTLSFromFile(cfg.TLSCertFile, cfg.TLSKeyFile)
		if err != nil {
			return fmt.Errorf("loading the TLS certificate: %w", err)
		}
		grpcOpts = append(grpcOpts, grpc.Creds(creds))
	}
	grpcSrv := svc.NewGRPCServer(grpcOpts...)
	// Reflection lets grpcurl discover rdq.v1 without the .proto file; like
	// every call but health checks, it needs a bearer token.
	reflection.Register(grpcSrv)
	httpLis, err := listen(cfg.Listen, cfg.MaxConnections)
	if err != nil {
		return err
	}
	grpcLis, err := listen(cfg.GRPCListen, cfg.MaxConnections)
	if err != nil {
		return errors.Join(err, httpLis.Close())
	}

	errc := make(chan error, 3)
	if cfg.OpsListen != "" {
		opsLis, err := listen(cfg.OpsListen, cfg.MaxConnections)
		if err != nil {
			return errors.Join(err, httpLis.Close(), grpcLis.Close())
		}
		opsSrv := &http.Server{
			Handler:           svc.OpsHandler(),
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    16 << 10,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}
		go func() {
			if err := opsSrv.Serve(opsLis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
		defer func() {
			if err := opsSrv.Close(); err != nil {
				log.Error("stopping the ops server", "error", err)
			}
		}()
		log.Info("ops endpoints serving", "addr", opsLis.Addr().String())
	}
	go func() {
		var err error
		if tlsOn {
			err = httpSrv.ServeTLS(httpLis, cfg.TLSCertFile, cfg.TLSKeyFile)
		} else {
			err = httpSrv.Serve(httpLis)
		}
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		errc <- err
	}()
	go func() { errc <- grpcSrv.Serve(grpcLis) }()
	log.Info("rdq-server serving", "rest", httpLis.Addr().String(), "grpc", grpcLis.Addr().String(), "tls", tlsOn, "worker_id", w.ID())

	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down: no new requests; running callbacks may finish", "grace", grace)
	case serveErr = <-errc:
		log.Error("a listener failed; shutting down", "error", serveErr)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := httpSrv.Shutdown(sctx); err != nil {
		log.Error("stopping the REST server", "error", err)
	}
	stopped := make(chan struct{})
	go func() { grpcSrv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-sctx.Done():
		grpcSrv.Stop()
	}
	return serveErr
}

// listen listens on addr, keeping at most max connections open.
func listen(addr string, max int) (net.Listener, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	limited, err := server.LimitListener(lis, max)
	if err != nil {
		return nil, errors.Join(err, lis.Close())
	}
	return limited, nil
}

// openStore opens the store url names (rdq's default SQLite file when it is
// empty; see package storeurl) and migrates it. It returns the store and a
// closer.
func openStore(ctx context.Context, url string, log *slog.Logger) (storeurl.Store, func(), error) {
	st, err := storeurl.Open(ctx, url, storeurl.Config{Logger: log})
	if err != nil {
		return nil, nil, fmt.Errorf("opening %s: %w", storeurl.Describe(url), err)
	}
	log.Info("store opened", "store", storeurl.Describe(url))
	closeFn := func() {
		if err := st.Close(); err != nil {
			log.Error("closing the store", "error", err)
		}
	}
	return st, closeFn, nil
}
