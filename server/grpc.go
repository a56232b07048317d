package server

import (
	"context"
	"errors"
	"fmt"
	"path"
	"runtime/debug"
	"strings"
	"time"

	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"

	"github.com/srjn45/rdq/proto/rdqv1"
)

// grpcServicePrefix is the full-method prefix of the rdq.v1 service.
var grpcServicePrefix = "/" + rdqv1.RdqService_ServiceDesc.ServiceName + "/"

// NewGRPCServer returns a gRPC server with the service registered and
// GRPCOptions applied, followed by opts (for example grpc.Creds with TLS
// credentials). The caller runs Serve and GracefulStop.
func (s *Service) NewGRPCServer(opts ...grpc.ServerOption) *grpc.Server {
	g := grpc.NewServer(append(s.GRPCOptions(), opts...)...)
	rdqv1.RegisterRdqServiceServer(g, s)
	return g
}

// GRPCOptions returns the server options the service needs on a gRPC server
// of the caller's making: the unary interceptor (authentication of the
// "authorization: Bearer <token>" metadata, trace context, request timeout,
// panic recovery, metrics), a receive limit of Config.MaxBodyBytes and a
// handshake timeout. Register the service with rdqv1.RegisterRdqServiceServer.
func (s *Service) GRPCOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(s.UnaryInterceptor),
		grpc.MaxRecvMsgSize(int(min(s.maxBody, 1<<31-1))),
		grpc.ConnectionTimeout(10 * time.Second),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: 5 * time.Minute}),
	}
}

// UnaryInterceptor authenticates calls of the rdq.v1 service and applies the
// request timeout; calls of other services on the same server pass through
// untouched. Errors leave as gRPC statuses carrying the stable code.
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
		if err != nil {
			var classified *Error
			if !errors.As(err, &classified) {
				err = s.fail(ctx, name, err)
			}
			e := classify(err)
			span.SetStatus(otelcodes.Error, string(e.Code))
			s.m.request(name, e.Code)
			err = e
			return
		}
		s.m.request(name, "")
	}()
	var authz string
	if v := md.Get("authorization"); len(v) > 0 {
		authz = v[0]
	}
	ctx, err = s.authenticate(ctx, authz)
	if err != nil {
		return nil, err
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
