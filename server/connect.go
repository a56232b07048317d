package server

import (
	"fmt"
	"mime"
	"net/http"

	"connectrpc.com/vanguard"
	"connectrpc.com/vanguard/vanguardgrpc"
	"google.golang.org/grpc"

	"github.com/srjn45/rdq/proto/rdqv1"
)

// rpcFramingBytes is what the framing of the Connect streaming and gRPC-Web
// protocols may add to a message (a 5-byte prefix per message, an
// end-of-stream message): room a request body has beyond MaxBodyBytes.
const rpcFramingBytes = 1 << 10

// newRPCHandler returns the handler of RPCPath: the rdq.v1 service of a
// gRPC server with GRPCOptions, reached over the Connect protocol, gRPC-Web
// and gRPC through a vanguard transcoder.
func (s *Service) newRPCHandler() (http.Handler, error) {
	g := grpc.NewServer(s.GRPCOptions()...)
	rdqv1.RegisterRdqServiceServer(g, s)
	t, err := vanguardgrpc.NewTranscoder(g, vanguard.WithDefaultServiceOptions(
		vanguard.WithMaxMessageBufferBytes(uint32(min(s.maxBody+rpcFramingBytes, 1<<31-1))),
	))
	if err != nil {
		return nil, fmt.Errorf("server: serving the rdq.v1 service over Connect and gRPC-Web: %w", err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The Connect protocol's version header is optional for unary
		// calls; the transcoder, which would read a request without it as
		// REST, gets it.
		if r.Method == http.MethodPost && r.Header.Get("Connect-Protocol-Version") == "" {
			mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if err == nil && (mt == "application/json" || mt == "application/proto") {
				r.Header.Set("Connect-Protocol-Version", "1")
			}
		}
		t.ServeHTTP(w, r)
	}), nil
}

// RPCPath is the path prefix under which Handler and APIHandler serve the
// rdq.v1.RdqService methods ("/rdq.v1.RdqService/Submit") over the Connect
// protocol (unary POST of JSON or binary protobuf, over HTTP/1.1 or
// HTTP/2), gRPC-Web and gRPC: the same implementation, authentication
// (the "Authorization: Bearer" header), interceptor, errors (the stable
// code in a google.rpc.ErrorInfo detail) and metrics as the gRPC server
// of NewGRPCServer, with request bodies of at most Config.MaxBodyBytes
// plus their framing.
const RPCPath = "/rdq.v1.RdqService/"
