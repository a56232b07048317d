package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/srjn45/rdq/proto/rdqv1"
	"github.com/srjn45/rdq/proto/rdqv1/rdqv1connect"
)

// RPCPath is the path prefix under which Handler and APIHandler serve the
// rdq.v1.RdqService methods ("/rdq.v1.RdqService/Submit") over the Connect
// protocol (unary POST of JSON or binary protobuf, over HTTP/1.1 or
// HTTP/2), gRPC-Web and gRPC (over HTTP/2), with connect-go: the same
// implementation, authentication (the "Authorization: Bearer" header),
// request timeout, trace context, panic recovery, metrics and errors (the
// stable code in a google.rpc.ErrorInfo detail) as the gRPC server of
// NewGRPCServer, with request messages of at most Config.MaxBodyBytes.
// A call is authenticated from its headers before its body is read, and
// its body is read as a REST request's is: in one of the principal's
// places (Config.MaxConcurrentBodies), within Config.BodyReadTimeout.
const RPCPath = "/" + rdqv1connect.RdqServiceName + "/"

// newRPCHandler returns the handler of RPCPath.
func (s *Service) newRPCHandler() (http.Handler, error) {
	path, h := rdqv1connect.NewRdqServiceHandler(s,
		connect.WithInterceptors(connect.UnaryInterceptorFunc(s.connectUnary)),
		connect.WithReadMaxBytes(int(min(s.maxBody, 1<<31-1))),
	)
	if path != RPCPath {
		return nil, fmt.Errorf("server: the Connect handler serves %s, not %s", path, RPCPath)
	}
	methods := map[string]bool{}
	for _, m := range rdqv1.RdqService_ServiceDesc.Methods {
		methods[m.MethodName] = true
	}
	return s.guardRPC(h, methods), nil
}

// guardRPC serves a call of RPCPath before next, connect-go's handler,
// reads its body: admit lets it in as it lets in a REST request, and the
// body is read within the size limit and the body read deadline. A call refused
// here is answered in its protocol's form, with the stable code, and
// counted in the request metrics when it names a method of the service.
func (s *Service) guardRPC(next http.Handler, methods map[string]bool) http.Handler {
	ew := connect.NewErrorWriter()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, RPCPath)
		refuse := func(ctx context.Context, err error) {
			e := classify(err)
			if e.Code == CodeInternal {
				s.log.ErrorContext(ctx, "rdq api: a Connect call refused before it was read", "method", name, "error", err)
			}
			if methods[name] {
				s.m.request(name, e.Code)
			}
			if r.ProtoMajor == 1 {
				// The rest of the body, if any, is not read: without
				// this, net/http would read on to reuse the connection.
				w.Header().Set("Connection", "close")
			}
			if werr := ew.Write(w, r, s.connectError(ctx, e.GRPCStatus().Err())); werr != nil {
				s.log.DebugContext(ctx, "rdq api: writing a Connect error", "error", werr)
			}
		}
		// A gRPC or gRPC-Web message comes after a 5-byte prefix; a
		// Connect unary message is the whole body.
		limit := s.maxBody
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
			limit += 5
		}
		ctx, release, err := s.admit(r.Context(), w, r, limit)
		defer release()
		if err != nil {
			refuse(ctx, err)
			return
		}
		if r.Method == http.MethodPost {
			// Read here, so that a body too large or too slow is refused
			// with the stable code before connect-go sees it.
			body, rerr := io.ReadAll(r.Body)
			if rerr != nil {
				refuse(ctx, s.readError(rerr))
				return
			}
			// A compressed message is inflated here too, within the
			// same limit, so that one that grows past it is refused
			// with the stable code as well.
			body, rerr = s.inflateRPC(r, body)
			if rerr != nil {
				refuse(ctx, rerr)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// inflateRPC returns body, the request body of a call of RPCPath, with its
// gzip compression undone and r's headers saying so: a Connect unary body
// compressed whole (Content-Encoding), or the compressed messages of a gRPC
// or gRPC-Web body (Grpc-Encoding, each message's flag), its messages
// together at most Config.MaxBodyBytes once inflated. A body in another encoding is
// returned as it is, for connect-go to accept or refuse.
func (s *Service) inflateRPC(r *http.Request, body []byte) ([]byte, error) {
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
		if r.Header.Get("Grpc-Encoding") != "gzip" {
			return body, nil
		}
		var out []byte
		var inflated int64
		for rest := body; len(rest) > 0; {
			if len(rest) < 5 {
				return nil, errorf(CodeInvalidArgument, "the request body ends inside a message's 5-byte prefix")
			}
			flags, n := rest[0], binary.BigEndian.Uint32(rest[1:5])
			if uint64(n) > uint64(len(rest)-5) {
				return nil, errorf(CodeInvalidArgument, fmt.Sprintf("the request body ends inside a message of %d bytes", n))
			}
			msg := rest[5 : 5+n]
			rest = rest[5+n:]
			if flags&1 != 0 {
				var err error
				if msg, err = s.gunzip(msg, s.maxBody-inflated); err != nil {
					return nil, err
				}
				inflated += int64(len(msg))
			}
			out = binary.BigEndian.AppendUint32(append(out, flags&^1), uint32(len(msg)))
			out = append(out, msg...)
		}
		return out, nil
	}
	if r.Header.Get("Content-Encoding") != "gzip" {
		return body, nil
	}
	plain, err := s.gunzip(body, s.maxBody)
	if err != nil {
		return nil, err
	}
	r.Header.Del("Content-Encoding")
	return plain, nil
}

// gunzip inflates gzip-compressed request bytes, refusing them when they
// inflate to more than limit bytes.
func (s *Service) gunzip(b []byte, limit int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, errorf(CodeInvalidArgument, "the request is declared gzip-compressed but is not gzip: "+err.Error())
	}
	plain, err := io.ReadAll(io.LimitReader(zr, limit+1))
	if err != nil {
		return nil, errorf(CodeInvalidArgument, "the request's gzip stream is corrupt: "+err.Error())
	}
	if int64(len(plain)) > limit {
		return nil, errorf(CodePayloadTooLarge, fmt.Sprintf("the request message is larger than %d bytes once decompressed", s.maxBody))
	}
	return plain, nil
}

// connectUnary runs a Connect call through UnaryInterceptor, as the gRPC
// server does: its headers are the call's metadata, and the gRPC status
// the interceptor answers with becomes a Connect error with the same code,
// message and details.
func (s *Service) connectUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		md := metadata.MD{}
		for k, vs := range req.Header() {
			md.Append(strings.ToLower(k), vs...)
		}
		ctx = metadata.NewIncomingContext(ctx, md)
		var resp connect.AnyResponse
		_, err := s.UnaryInterceptor(ctx, req.Any(), &grpc.UnaryServerInfo{FullMethod: req.Spec().Procedure},
			func(ctx context.Context, _ any) (any, error) {
				r, err := next(ctx, req)
				if err != nil {
					return nil, err
				}
				resp = r
				return r.Any(), nil
			})
		if err != nil {
			return nil, s.connectError(ctx, err)
		}
		return resp, nil
	}
}

// connectError is the Connect error of err, a gRPC status (or a Connect
// error already): the same code, message and details.
func (s *Service) connectError(ctx context.Context, err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	st, ok := status.FromError(err)
	if !ok {
		s.log.ErrorContext(ctx, "rdq api: a Connect call ended with an error that is no gRPC status", "error", err)
		return connect.NewError(connect.CodeInternal, errors.New("internal error; the server log has the details"))
	}
	out := connect.NewError(connect.Code(st.Code()), errors.New(st.Message()))
	for _, d := range st.Proto().GetDetails() {
		msg, derr := d.UnmarshalNew()
		var detail *connect.ErrorDetail
		if derr == nil {
			detail, derr = connect.NewErrorDetail(msg)
		}
		if derr != nil {
			// The error itself still goes out, without this detail.
			s.log.ErrorContext(ctx, "rdq api: a detail of an error cannot be sent over Connect", "type", d.GetTypeUrl(), "error", derr)
			continue
		}
		out.AddDetail(detail)
	}
	return out
}
