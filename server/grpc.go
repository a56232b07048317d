package server

import (
	"context"
	"fmt"
	"path"
	"runtime/debug"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/tap"

	"github.com/srjn45/rdq/proto/rdqv1"
)

// grpcServicePrefix is the full-method prefix of the rdq.v1 service.
var grpcServicePrefix = "/" + rdqv1.RdqService_ServiceDesc.ServiceName + "/"

// Limits of the gRPC server GRPCOptions configures.
const (
	// GRPCMaxConcurrentStreams bounds the concurrent calls of one
	// connection.
	GRPCMaxConcurrentStreams = 100
	// GRPCMaxHeaderListSize bounds the metadata of one call, in bytes:
	// room for a bearer token and trace context, not for a payload.
	GRPCMaxHeaderListSize = 16 << 10
	// GRPCKeepaliveMinTime is the shortest interval between client pings
	// the server tolerates; a client pinging more often, or pinging
	// without a call in progress, is disconnected.
	GRPCKeepaliveMinTime = 30 * time.Second
)

// grpcHealthPrefix is the one service a gRPC call may use without a token.
const grpcHealthPrefix = "/grpc.health.v1.Health/"

// NewGRPCServer returns a gRPC server with the service registered and
// GRPCOptions applied, followed by opts (for example grpc.Creds with TLS
// credentials). The caller runs Serve (over a LimitListener, to bound
// connections) and GracefulStop.
func (s *Service) NewGRPCServer(opts ...grpc.ServerOption) *grpc.Server {
	g := grpc.NewServer(append(s.GRPCOptions(), opts...)...)
	rdqv1.RegisterRdqServiceServer(g, s)
	return g
}

// GRPCOptions returns the server options the service needs on a gRPC server
// of the caller's making:
//
//   - a tap handle (grpc.InTapHandle, so no other may be installed) that
//     authenticates the "authorization: Bearer <token>" metadata of every
//     call, of every service but grpc.health.v1 (reflection included),
//     before the server reads its message: an unauthenticated call costs
//     no message buffer and no handler goroutine. The Authenticator runs
//     on the connection's reading goroutine and must be quick;
//   - the unary interceptor (trace context, request timeout, panic
//     recovery, metrics);
//   - limits: messages of at most Config.MaxBodyBytes, at most
//     GRPCMaxConcurrentStreams calls per connection, metadata of at most
//     GRPCMaxHeaderListSize bytes, a 10 s handshake timeout, idle
//     connections closed after 5 minutes, and a keepalive enforcement
//     policy that disconnects clients pinging more often than
//     GRPCKeepaliveMinTime or without a call in progress.
//
// Register the service with rdqv1.RegisterRdqServiceServer.
func (s *Service) GRPCOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.InTapHandle(s.tapAuth),
		grpc.ChainUnaryInterceptor(s.UnaryInterceptor),
		grpc.MaxRecvMsgSize(int(min(s.maxBody, 1<<31-1))),
		grpc.MaxConcurrentStreams(GRPCMaxConcurrentStreams),
		grpc.MaxHeaderListSize(GRPCMaxHeaderListSize),
		grpc.ConnectionTimeout(10 * time.Second),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: 5 * time.Minute}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: GRPCKeepaliveMinTime, PermitWithoutStream: false}),
	}
}

// tapAuth authenticates a call from its headers, before its message is
// read, and hands the principal to the interceptor in the context.
func (s *Service) tapAuth(ctx context.Context, info *tap.Info) (context.Context, error) {
	if strings.HasPrefix(info.FullMethodName, grpcHealthPrefix) {
		return ctx, nil
	}
	var authz string
	if v := info.Header.Get("authorization"); len(v) > 0 {
		authz = v[0]
	}
	actx, err := s.authenticate(ctx, authz)
	if err != nil {
		e := classify(err)
		if e.Code == CodeInternal {
			s.log.ErrorContext(ctx, "rdq api: authenticating a gRPC call", "method", info.FullMethodName, "error", err)
		}
		if strings.HasPrefix(info.FullMethodName, grpcServicePrefix) {
			s.m.request(path.Base(info.FullMethodName), e.Code)
		}
		return ctx, e
	}
	return actx, nil
}

// UnaryInterceptor applies the request timeout, trace context, panic
// recovery and metrics to calls of the rdq.v1 service; calls of other
// services on the same server pass through untouched. The caller's
// principal comes from the tap handle of GRPCOptions; a server built
// without it has the interceptor authenticate the metadata instead. Errors
// leave as gRPC statuses carrying the stable code.
func (s *Service) UnaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	if !strings.HasPrefix(info.FullMethod, grpcServicePrefix) {
		return handler(ctx, req)
	}
	name := path.Base(info.FullMethod)
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	md, _ := metadata.FromIncomingContext(ctx)
	ctx = s.propagator.Extract(ctx, mdCarrier(md))
	ctx, span := s.tracer.Start(ctx, "rdq.v1.RdqService/"+name, trace.WithSpanKind(trace.SpanKindServer))
	defer span.End()
	defer func() {
		if v := recover(); v != nil {
			s.log.ErrorContext(ctx, "rdq api handler panicked", "method", name, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			resp, err = nil, errorf(CodeInternal, "internal error; the server log has the details")
		}
		if e := s.outcome(ctx, span, name, err); e != nil {
			err = e
		}
	}()
	if _, ok := PrincipalFrom(ctx); !ok {
		var authz string
		if v := md.Get("authorization"); len(v) > 0 {
			authz = v[0]
		}
		ctx, err = s.authenticate(ctx, authz)
		if err != nil {
			return nil, err
		}
	}
	return handler(ctx, req)
}

// mdCarrier adapts incoming gRPC metadata to a propagation.TextMapCarrier.
type mdCarrier metadata.MD

func (c mdCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c mdCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c mdCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
