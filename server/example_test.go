package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/srjn45/rdq/proto/rdqv1"
	"github.com/srjn45/rdq/server"
	"github.com/srjn45/rdq/sqlitestore"
)

// A configured token must look random: a weak one is refused, saying what
// a strong one is.
func ExampleValidateToken() {
	fmt.Println(server.ValidateToken("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"))
	fmt.Println(server.ValidateToken("change-me"))
	fmt.Println(server.ValidateToken("pV3q8Zr1nK0xYb7sLw2Tj5Hc9Gd4Fm6AeQuRoIiCtM="))
	// Output:
	// rdq: invalid input: the token repeats a few characters (0.0 bits of entropy per character): use at least 32 random characters, such as the output of `openssl rand -base64 32`
	// rdq: invalid input: the token is 9 bytes: use at least 32 random characters, such as the output of `openssl rand -base64 32`
	// <nil>
}

// /metrics behind a bearer token, on a handler of its own.
func ExampleConfig_metricsToken() {
	st, err := sqlitestore.Open(context.Background(), filepath.Join(os.TempDir(), "rdq-example-metrics.db"), sqlitestore.Config{})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	tokens, err := server.NewTokens(nil)
	if err != nil {
		panic(err)
	}
	const metricsToken = "Zr8Kq2Lm5Xv9Tb3Nc7Hd1Jf4Gk6Sa0We-yUoIiRtEwQ" // from the environment, in real use
	svc, err := server.New(server.Config{Store: st, Auth: tokens, Gatherer: prometheus.NewRegistry(), MetricsToken: metricsToken})
	if err != nil {
		panic(err)
	}
	ops := httptest.NewServer(svc.OpsHandler()) // on a listener only the monitoring network reaches
	defer ops.Close()
	for _, tok := range []string{"", metricsToken} {
		req, err := http.NewRequest("GET", ops.URL+"/metrics", nil)
		if err != nil {
			panic(err)
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		res.Body.Close()
		fmt.Println(res.StatusCode)
	}
	// Output:
	// 401
	// 200
}

// Roles are granted per queue pattern and include each other.
func ExampleNewTokens() {
	tokens, err := server.NewTokens(map[string]*server.Principal{
		"shop-rm2xgBjyGEDn-5WzDXz6YlByf8khquOlORqf2t78RxU":   {Name: "shop", Grants: []server.Grant{{Queue: "orders.*", Role: server.RoleSubmitter}}},
		"oncall-AV-dYtXAQHzzMXNSDnb1MAcW1WBI88uXxaXowcoAB5Q": {Name: "oncall", Grants: []server.Grant{{Queue: "*", Role: server.RoleOperator}}},
	})
	if err != nil {
		panic(err)
	}
	shop, _ := tokens.Authenticate(context.Background(), "shop-rm2xgBjyGEDn-5WzDXz6YlByf8khquOlORqf2t78RxU")
	oncall, _ := tokens.Authenticate(context.Background(), "oncall-AV-dYtXAQHzzMXNSDnb1MAcW1WBI88uXxaXowcoAB5Q")
	fmt.Println(shop.Name, "submit orders.eu:", shop.Can(server.RoleSubmitter, "orders.eu"))
	fmt.Println(shop.Name, "redrive orders.eu:", shop.Can(server.RoleOperator, "orders.eu"))
	fmt.Println(oncall.Name, "submit emails:", oncall.Can(server.RoleSubmitter, "emails"))
	_, err = tokens.Authenticate(context.Background(), "guess")
	fmt.Println(err)
	// Output:
	// shop submit orders.eu: true
	// shop redrive orders.eu: false
	// oncall submit emails: true
	// server: unauthenticated: unknown bearer token
}

// The REST API is an http.Handler; here over the embedded store.
func ExampleService_Handler() {
	dir, err := os.MkdirTemp("", "rdq-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(dir, "rdq.db"), sqlitestore.Config{})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		panic(err)
	}
	tokens, err := server.NewTokens(map[string]*server.Principal{
		"shop-rm2xgBjyGEDn-5WzDXz6YlByf8khquOlORqf2t78RxU": {Name: "shop", Grants: []server.Grant{{Queue: "orders", Role: server.RoleSubmitter}}},
	})
	if err != nil {
		panic(err)
	}
	svc, err := server.New(server.Config{Store: st, Auth: tokens, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()

	post := func(token, body string) {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/tasks", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		fmt.Println(resp.StatusCode, resp.Header.Get("Content-Type"), strings.Contains(string(b), `"status":"PENDING"`))
	}
	post("shop-rm2xgBjyGEDn-5WzDXz6YlByf8khquOlORqf2t78RxU", `{"version": 1, "queue": "orders", "handler": "charge", "payload": "eyJvcmRlciI6NDJ9"}`)
	post("shop-rm2xgBjyGEDn-5WzDXz6YlByf8khquOlORqf2t78RxU", `{"version": 1, "queue": "emails", "handler": "send"}`)
	post("wrong-token", `{}`)
	// Output:
	// 200 application/json true
	// 403 application/problem+json false
	// 401 application/problem+json false
}

// Serving the API for real: an http.Server with timeouts, over a listener
// that bounds open connections, with the ops endpoints on a listener of
// their own.
func ExampleService_APIHandler() {
	dir, err := os.MkdirTemp("", "rdq-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(dir, "rdq.db"), sqlitestore.Config{})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		panic(err)
	}
	tokens, err := server.NewTokens(map[string]*server.Principal{
		"shop-rm2xgBjyGEDn-5WzDXz6YlByf8khquOlORqf2t78RxU": {Name: "shop", Grants: []server.Grant{{Queue: "orders", Role: server.RoleSubmitter}}},
	})
	if err != nil {
		panic(err)
	}
	svc, err := server.New(server.Config{Store: st, Auth: tokens, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}

	serve := func(h http.Handler) (addr string, stop func()) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		limited, err := server.LimitListener(lis, 1024)
		if err != nil {
			panic(err)
		}
		srv := &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       30 * time.Second,
			WriteTimeout:      server.DefaultRequestTimeout + 15*time.Second,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    64 << 10,
		}
		done := make(chan struct{})
		go func() { defer close(done); _ = srv.Serve(limited) }()
		return limited.Addr().String(), func() { _ = srv.Close(); <-done }
	}
	api, stopAPI := serve(svc.APIHandler())
	defer stopAPI()
	ops, stopOps := serve(svc.OpsHandler())
	defer stopOps()

	status := func(url string) int {
		resp, err := http.Get(url)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	fmt.Println("ops /healthz:", status("http://"+ops+"/healthz"))
	fmt.Println("api /healthz:", status("http://"+api+"/healthz"))
	fmt.Println("api /v1/queues without a token:", status("http://"+api+"/v1/queues"))
	// Output:
	// ops /healthz: 200
	// api /healthz: 404
	// api /v1/queues without a token: 401
}

// The rdq.v1 service over the Connect protocol and gRPC-Web, on the REST
// handler: a Connect client of any language calls the gRPC implementation.
func ExampleRPCPath() {
	dir, err := os.MkdirTemp("", "rdq-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(dir, "rdq.db"), sqlitestore.Config{})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		panic(err)
	}
	const token = "shop-rm2xgBjyGEDn-5WzDXz6YlByf8khquOlORqf2t78RxU"
	tokens, err := server.NewTokens(map[string]*server.Principal{
		token: {Name: "shop", Grants: []server.Grant{{Queue: "orders", Role: server.RoleSubmitter}}},
	})
	if err != nil {
		panic(err)
	}
	svc, err := server.New(server.Config{Store: st, Auth: tokens, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()

	for _, opts := range [][]connect.ClientOption{nil, {connect.WithGRPCWeb()}} {
		submit := connect.NewClient[rdqv1.SubmitRequest, rdqv1.SubmitResponse](srv.Client(), srv.URL+server.RPCPath+"Submit", opts...)
		for _, queue := range []string{"orders", "emails"} {
			req := connect.NewRequest(&rdqv1.SubmitRequest{Task: &rdqv1.TaskSpec{Queue: queue, Handler: "charge", Payload: []byte(`{"order":42}`)}})
			req.Header().Set("Authorization", "Bearer "+token)
			resp, err := submit.CallUnary(ctx, req)
			if err != nil {
				fmt.Println(queue, connect.CodeOf(err))
				continue
			}
			fmt.Println(queue, resp.Msg.GetTask().GetStatus())
		}
	}
	// Output:
	// orders PENDING
	// emails permission_denied
	// orders PENDING
	// emails permission_denied
}
