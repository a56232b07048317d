package server_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/srjn45/rdq/proto/rdqv1"
	"github.com/srjn45/rdq/server"
	"github.com/srjn45/rdq/sqlitestore"
)

// grpcServer serves a service over the embedded store on a loopback port,
// with reflection registered as rdq-server does.
func grpcServer(t *testing.T) (addr string, conn *grpc.ClientConn) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "rdq.db"), sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	tokens, err := server.NewTokens(map[string]*server.Principal{
		tokSubmitter: {Name: "shop", Grants: []server.Grant{{Queue: "*", Role: server.RoleSubmitter}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := server.New(server.Config{Store: st, Auth: tokens, Logger: slog.New(slog.DiscardHandler), MaxBodyBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := svc.NewGRPCServer()
	reflection.Register(g)
	served := make(chan error, 1)
	go func() { served <- g.Serve(lis) }()
	conn, err = grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := conn.Close(); err != nil {
			t.Errorf("closing the client: %v", err)
		}
		g.Stop()
		if err := <-served; err != nil {
			t.Errorf("gRPC server: %v", err)
		}
	})
	return lis.Addr().String(), conn
}

// An unauthenticated call is refused from its headers: its message is
// never read, so even one over the size limit gets unauthenticated, not
// resource_exhausted.
func TestGRPCAuthenticatesBeforeReading(t *testing.T) {
	_, conn := grpcServer(t)
	c := rdqv1.NewRdqServiceClient(conn)
	big := &rdqv1.SubmitRequest{Task: &rdqv1.TaskSpec{Queue: "q", Handler: "h", Payload: make([]byte, 200<<10)}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Submit(ctx, big)
	wantGRPCCode(t, err, codes.Unauthenticated, server.CodeUnauthenticated)
	_, err = c.Submit(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer not-a-valid-token-at-all"), big)
	wantGRPCCode(t, err, codes.Unauthenticated, server.CodeUnauthenticated)
	// Authenticated, the same message is read and refused for its size.
	_, err = c.Submit(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tokSubmitter), big)
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("authenticated oversized message: %v", err)
	}
	res, err := c.Submit(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tokSubmitter), &rdqv1.SubmitRequest{Task: &rdqv1.TaskSpec{Queue: "q", Handler: "h"}})
	if err != nil || res.GetTask().GetId() == "" {
		t.Fatalf("authenticated submit: %v %v", res, err)
	}
}

// Reflection answers only authenticated callers.
func TestGRPCReflectionNeedsAToken(t *testing.T) {
	_, conn := grpcServer(t)
	list := func(ctx context.Context) ([]string, error) {
		stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
		if err != nil {
			return nil, err
		}
		if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		resp, err := stream.Recv()
		if err != nil {
			return nil, err
		}
		var names []string
		for _, s := range resp.GetListServicesResponse().GetService() {
			names = append(names, s.GetName())
		}
		return names, stream.CloseSend()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if names, err := list(ctx); status.Code(err) != codes.Unauthenticated {
		t.Errorf("reflection without a token: %v %v", names, err)
	}
	names, err := list(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tokSubmitter))
	if err != nil || !strings.Contains(strings.Join(names, ","), "rdq.v1.RdqService") {
		t.Errorf("reflection with a token: %v %v", names, err)
	}
}

// Metadata beyond GRPCMaxHeaderListSize is refused.
func TestGRPCMetadataIsBounded(t *testing.T) {
	_, conn := grpcServer(t)
	c := rdqv1.NewRdqServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tokSubmitter, "x-padding", strings.Repeat("p", 64<<10))
	if _, err := c.Submit(ctx, &rdqv1.SubmitRequest{Task: &rdqv1.TaskSpec{Queue: "q", Handler: "h"}}); err == nil {
		t.Error("a call with 64 KiB of metadata was served")
	}
}

// http2Frame is one raw HTTP/2 frame.
type http2Frame struct {
	typ, flags byte
	payload    []byte
}

func readFrame(r *bufio.Reader) (http2Frame, error) {
	var h [9]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return http2Frame{}, err
	}
	n := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
	f := http2Frame{typ: h[3], flags: h[4], payload: make([]byte, n)}
	_, err := io.ReadFull(r, f.payload)
	return f, err
}

// rawHTTP2 opens an HTTP/2 connection by hand and returns the server's
// SETTINGS.
func rawHTTP2(t *testing.T, addr string) (net.Conn, *bufio.Reader, map[uint16]uint32) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	preface := append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 4, 0, 0, 0, 0, 0) // + empty SETTINGS
	if _, err := c.Write(preface); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	for {
		f, err := readFrame(r)
		if err != nil {
			t.Fatalf("reading the server's SETTINGS: %v", err)
		}
		if f.typ != 4 || f.flags&1 != 0 {
			continue
		}
		settings := map[uint16]uint32{}
		for p := f.payload; len(p) >= 6; p = p[6:] {
			settings[binary.BigEndian.Uint16(p)] = binary.BigEndian.Uint32(p[2:])
		}
		return c, r, settings
	}
}

// The server announces its stream and header limits to every client.
func TestGRPCAnnouncesLimits(t *testing.T) {
	addr, _ := grpcServer(t)
	_, _, settings := rawHTTP2(t, addr)
	const maxConcurrentStreams, maxHeaderListSize = 0x3, 0x6
	if got := settings[maxConcurrentStreams]; got != server.GRPCMaxConcurrentStreams {
		t.Errorf("SETTINGS_MAX_CONCURRENT_STREAMS = %d, want %d", got, server.GRPCMaxConcurrentStreams)
	}
	if got := settings[maxHeaderListSize]; got != server.GRPCMaxHeaderListSize {
		t.Errorf("SETTINGS_MAX_HEADER_LIST_SIZE = %d, want %d", got, server.GRPCMaxHeaderListSize)
	}
}

// A client pinging without a call in progress is sent away with
// ENHANCE_YOUR_CALM.
func TestGRPCKeepaliveEnforced(t *testing.T) {
	addr, _ := grpcServer(t)
	c, r, _ := rawHTTP2(t, addr)
	ping := []byte{0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}
	for i := 0; i < 5; i++ {
		if _, err := c.Write(ping); err != nil {
			break // the server may already have closed the connection
		}
	}
	for {
		f, err := readFrame(r)
		if err != nil {
			t.Fatalf("connection ended without GOAWAY: %v", err)
		}
		if f.typ == 7 { // GOAWAY: last stream id, error code
			if code := binary.BigEndian.Uint32(f.payload[4:8]); code != 0xb {
				t.Errorf("GOAWAY code %#x, want ENHANCE_YOUR_CALM (0xb)", code)
			}
			return
		}
	}
}

// LimitListener keeps at most n connections open; one over the limit is
// closed at once, and a place freed by a close is used again.
func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := server.LimitListener(inner, 0); err == nil {
		t.Error("a limit of 0 was accepted")
	}
	lis, err := server.LimitListener(inner, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial()
	first := <-accepted
	second := dial()
	if err := second.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := second.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Errorf("a connection over the limit: read %v, want it closed", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	third := dial()
	if _, err := third.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	c := <-accepted
	buf := make([]byte, 1)
	if _, err := io.ReadFull(c, buf); err != nil || buf[0] != 'x' {
		t.Errorf("the connection after a close was not accepted: %q %v", buf, err)
	}
	c.Close()
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}
