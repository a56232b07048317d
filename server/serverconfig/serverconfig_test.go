package serverconfig_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/callback"
	"github.com/srjn45/rdq/server"
	"github.com/srjn45/rdq/server/serverconfig"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The variables the sample names, all cleared so that its literals count.
var sampleEnv = []string{serverconfig.DatabaseURLEnv, "RDQ_CALLBACK_SECRET", "RDQ_METRICS_TOKEN", "RDQ_TOKEN_SHOP", "RDQ_TOKEN_ONCALL", "RDQ_TOKEN_ROOT"}

func clearEnv(t *testing.T) {
	t.Helper()
	for _, v := range sampleEnv {
		t.Setenv(v, "")
	}
}

func readSample(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile("testdata/sample.json")
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// loadSample parses the sample with the environment cleared.
func loadSample(t *testing.T) *serverconfig.File {
	t.Helper()
	clearEnv(t)
	f, err := serverconfig.Parse(readSample(t))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// The sample loads, with its defaults filled in, and everything built
// from it is valid.
func TestSample(t *testing.T) {
	clearEnv(t)
	t.Setenv("RDQ_TOKEN_SHOP", "env-ROIEtgFOUmjNQZDl0vLrYoS24d8qgJvZjSbTleyKGVw")
	t.Setenv(serverconfig.DatabaseURLEnv, "sqlite:/tmp/from-env.db")
	f, err := serverconfig.Load("testdata/sample.json")
	if err != nil {
		t.Fatal(err)
	}
	if f.Listen != "127.0.0.1:8080" || f.GRPCListen != "127.0.0.1:9090" || f.MaxConnections != serverconfig.DefaultMaxConnections {
		t.Errorf("listeners: %q %q %d", f.Listen, f.GRPCListen, f.MaxConnections)
	}
	if f.DatabaseURL != "sqlite:/tmp/from-env.db" {
		t.Errorf("database_url = %q, want the value of %s", f.DatabaseURL, serverconfig.DatabaseURLEnv)
	}

	tokens, err := f.Tokens()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	shop, err := tokens.Authenticate(ctx, "env-ROIEtgFOUmjNQZDl0vLrYoS24d8qgJvZjSbTleyKGVw")
	if err != nil || shop.Name != "shop" || !shop.Can(server.RoleSubmitter, "orders") || shop.Can(server.RoleOperator, "orders") {
		t.Errorf("shop: %+v %v", shop, err)
	}
	if _, err := tokens.Authenticate(ctx, "dev-submitter-change-me-eQARNuyd8TUys086A0FlB7W6"); err == nil {
		t.Error("the literal token still works although the environment overrides it")
	}
	root, err := tokens.Authenticate(ctx, "dev-admin-change-me-LBHf7G7WxI3NyMtJHvgoVR-5")
	if err != nil || !root.CanAll(server.RoleAdmin) {
		t.Errorf("root: %+v %v", root, err)
	}

	q := f.WorkerQueues()["orders"]
	if q.Policy.MaxAttempts != 3 || q.Policy.InitialBackoff != time.Second || q.Policy.MaxBackoff != time.Minute || q.Timeout != 15*time.Second || q.Concurrency != 4 {
		t.Errorf("orders queue: %+v", q)
	}
	if err := q.Policy.Validate(); err != nil {
		t.Error(err)
	}
	if got, want := f.Handlers(), []string{"charge", "refund", "send"}; !slices.Equal(got, want) {
		t.Errorf("Handlers() = %v, want %v", got, want)
	}
	served := f.QueueHandlers()
	if len(served) != 2 || !slices.Equal(served["orders"], []string{"charge", "refund"}) || !slices.Equal(served["emails"], []string{"send"}) {
		t.Errorf("QueueHandlers() = %v", served)
	}

	cc := f.CallbackConfig()
	if string(cc.Secret) != "dev-only-callback-secret-change-me" || cc.Timeout != 10*time.Second || !slices.Equal(cc.Allow, []string{"127.0.0.1:9000"}) || !slices.Equal(cc.AllowAddrs, []string{"127.0.0.1"}) {
		t.Errorf("CallbackConfig() = %+v", cc)
	}
	caller, err := callback.New(cc)
	if err != nil {
		t.Fatal(err)
	}
	defer caller.Close()
	targets := f.Targets()
	if targets["emails"].URL != "http://127.0.0.1:9000/hooks/emails" || targets["emails"].Secret != nil {
		t.Errorf("emails target: %+v", targets["emails"])
	}
	if _, err := caller.Router(targets); err != nil {
		t.Error(err)
	}
}

// Each secret is the value of the variable its *_env setting names when
// that is set, else the file's literal; a queue's own secret signs its
// callbacks.
func TestSecretsFromEnvironment(t *testing.T) {
	clearEnv(t)
	t.Setenv("RDQ_CALLBACK_SECRET", "callback-secret-from-the-environment")
	t.Setenv("RDQ_METRICS_TOKEN", "m3tr1cs-Q8vN2kLp0xZr7TyW4bHs6JdFgCa9")
	t.Setenv("TEST_EMAILS_SECRET", "emails-secret-from-the-environment")
	raw := strings.Replace(string(readSample(t)), `"handlers": ["send"],`, `"handlers": ["send"], "secret_env": "TEST_EMAILS_SECRET",`, 1)
	f, err := serverconfig.Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if f.Callback.Secret != "callback-secret-from-the-environment" || f.MetricsToken != "m3tr1cs-Q8vN2kLp0xZr7TyW4bHs6JdFgCa9" {
		t.Errorf("secrets: callback %q, metrics %q", f.Callback.Secret, f.MetricsToken)
	}
	if s := string(f.Targets()["emails"].Secret); s != "emails-secret-from-the-environment" {
		t.Errorf("emails secret = %q", s)
	}
	if s := f.Targets()["orders"].Secret; s != nil {
		t.Errorf("orders has a secret of its own: %q", s)
	}
	if f.Principals[1].Token != "dev-operator-change-me-caHfrMSWTiwafjcpBNiaCpAD" {
		t.Errorf("an unset variable replaced the literal token: %q", f.Principals[1].Token)
	}
}

// Every mistake Validate knows is an error naming the setting and saying
// what to do.
func TestValidateNamesEveryMistake(t *testing.T) {
	cases := map[string]struct {
		change func(f *serverconfig.File)
		want   string
	}{
		"listen":          {func(f *serverconfig.File) { f.Listen = "8080" }, `listen "8080" is not host:port: write it as 127.0.0.1:8080`},
		"ops_listen":      {func(f *serverconfig.File) { f.OpsListen = "localhost" }, `ops_listen "localhost" is not host:port`},
		"shared listener": {func(f *serverconfig.File) { f.GRPCListen = f.Listen }, "grpc_listen 127.0.0.1:8080 is also listen: give each listener its own address"},
		"demo receiver":   {func(f *serverconfig.File) { f.DemoReceiver = "127.0.0.1:9090" }, "demo_receiver 127.0.0.1:9090 is also grpc_listen"},
		"half of tls":     {func(f *serverconfig.File) { f.TLSKeyFile = "key.pem" }, "tls_cert_file and tls_key_file: set both to serve TLS, or neither"},
		"max connections": {func(f *serverconfig.File) { f.MaxConnections = -1 }, "max_connections is -1: use a positive number, or 0 for the default (1024)"},
		"client header":   {func(f *serverconfig.File) { f.ConsoleClientHeader = "X-Forwarded-For" }, "console_client_header and console_trusted_proxies: set both"},
		"trusted proxy": {func(f *serverconfig.File) {
			f.ConsoleClientHeader, f.ConsoleTrustedProxies = "X-Forwarded-For", []string{"proxy.internal"}
		}, `trusted proxy "proxy.internal" is neither an IP address nor a CIDR prefix`},
		"callback timeout": {func(f *serverconfig.File) { f.Callback.Timeout = serverconfig.Duration(-time.Second) }, "callback.timeout is -1s: use a positive duration"},
		"callback secret":  {func(f *serverconfig.File) { f.Callback.Secret = "short" }, "callback.secret (or RDQ_CALLBACK_SECRET): rdq: invalid input: callback: the signing secret is 5 bytes; use at least 16 random bytes"},
		"whsec secret":     {func(f *serverconfig.File) { f.Callback.Secret = "whsec_!!" }, "callback.secret (or RDQ_CALLBACK_SECRET): rdq: invalid input: callback: a whsec_ secret must be followed by standard base64"},
		"no secret": {func(f *serverconfig.File) {
			f.Callback.Secret = ""
			setQueue(f, "orders", func(q *serverconfig.Queue) { q.Secret = "the-orders-receiver-secret" })
		}, "queues.emails: no secret signs its callbacks: set callback.secret or callback.secret_env for every queue, or this queue's secret or secret_env (RDQ_CALLBACK_SECRET is not set)"},
		"queue secret":      {inQueue("orders", func(q *serverconfig.Queue) { q.Secret, q.SecretEnv = "0123456789", "ORDERS_SECRET" }), "queues.orders.secret (or ORDERS_SECRET): rdq: invalid input: callback: the signing secret is 10 bytes"},
		"empty allowlist":   {func(f *serverconfig.File) { f.Callback.Allow = nil }, `callback.allow is empty: list the hosts or URL prefixes callbacks may target, such as "hooks.internal"`},
		"allow entry":       {func(f *serverconfig.File) { f.Callback.Allow = []string{"ftp://hooks.internal/"} }, "callback.allow: "},
		"allow_addrs":       {func(f *serverconfig.File) { f.Callback.AllowAddrs = []string{"localhost"} }, `callback.allow_addrs: rdq: invalid input: callback: AllowAddrs entry "localhost": want an IP address or a CIDR prefix`},
		"url not allowed":   {inQueue("orders", func(q *serverconfig.Queue) { q.URL = "http://127.0.0.1:9001/hooks" }), "queues.orders.url: rdq: invalid input: callback: target is not on the allowlist: http://127.0.0.1:9001/hooks: list it (or a prefix of it) in callback.allow"},
		"no queues":         {func(f *serverconfig.File) { f.Queues = nil }, "queues: none configured: add one, with the url its tasks are POSTed to and the handler names they may use"},
		"queue name":        {func(f *serverconfig.File) { f.Queues["e mails"] = f.Queues["emails"] }, `queues: rdq: invalid input: queue name "e mails" contains ' '; use letters, digits and . _ - : /`},
		"no url":            {inQueue("emails", func(q *serverconfig.Queue) { q.URL = "" }), "queues.emails.url is empty: give the callback URL its tasks are POSTed to"},
		"no handlers":       {inQueue("emails", func(q *serverconfig.Queue) { q.Handlers = nil }), "queues.emails.handlers is empty: list the handler names its tasks may use"},
		"handler typo":      {inQueue("emails", func(q *serverconfig.Queue) { q.Handlers = []string{"se nd"} }), `queues.emails.handlers: rdq: invalid input: handler name "se nd" contains ' '`},
		"max attempts":      {inQueue("emails", func(q *serverconfig.Queue) { q.MaxAttempts = -5 }), "queues.emails.max_attempts is -5: use a positive number, 0 for the default (20) or -1 for no limit"},
		"initial backoff":   {inQueue("emails", func(q *serverconfig.Queue) { q.InitialBackoff = -1 }), "queues.emails.initial_backoff is -1ns: use a positive duration, or leave it out for the default"},
		"max backoff":       {inQueue("emails", func(q *serverconfig.Queue) { q.MaxBackoff = serverconfig.Duration(-time.Minute) }), "queues.emails.max_backoff is -1m0s"},
		"queue timeout":     {inQueue("emails", func(q *serverconfig.Queue) { q.Timeout = serverconfig.Duration(-time.Second) }), "queues.emails.timeout is -1s"},
		"negative workers":  {inQueue("emails", func(q *serverconfig.Queue) { q.Concurrency = -2 }), "queues.emails.concurrency is -2: use a positive number, or 0 for the default (10)"},
		"no principals":     {func(f *serverconfig.File) { f.Principals = nil }, "principals: none configured, so nobody could call the API"},
		"unnamed principal": {func(f *serverconfig.File) { f.Principals[1].Name = "" }, "principals[1].name is empty: name the caller"},
		"control character": {func(f *serverconfig.File) { f.Principals[1].Name = "on\ncall" }, `principals: rdq: invalid input: principal name "on\ncall" contains a control character`},
		"duplicate name":    {func(f *serverconfig.File) { f.Principals[2].Name = "oncall" }, "principals: oncall appears twice: give each caller its own name"},
		"unknown role":      {func(f *serverconfig.File) { f.Principals[1].Grants[0].Role = "root" }, `principal oncall: grants[0]: rdq: invalid input: role "root": use submitter, operator or admin`},
		"bad grant":         {func(f *serverconfig.File) { f.Principals[1].Grants[0].Queue = "a*b" }, "principals: principal oncall: rdq: invalid input: queue pattern"},
		"no token":          {func(f *serverconfig.File) { f.Principals[1].Token = "" }, "principal oncall has no token: set token_env to a variable holding one (RDQ_TOKEN_ONCALL is not set), or token; use at least 32 random characters"},
		"shared token":      {func(f *serverconfig.File) { f.Principals[2].Token = f.Principals[1].Token }, "principal root: its token is also the token of oncall: give each principal its own"},
		"weak token":        {func(f *serverconfig.File) { f.Principals[1].Token = "aaaaaaaaaaaaaaaa" }, "principal oncall: token (or RDQ_TOKEN_ONCALL): rdq: invalid input: the token is 16 bytes: use at least 32 random characters, such as the output of `openssl rand -base64 32`"},
		"weak metrics":      {func(f *serverconfig.File) { f.MetricsToken = "metrics" }, "metrics_token (or RDQ_METRICS_TOKEN): rdq: invalid input: the token is 7 bytes"},
	}
	if err := loadSample(t).Validate(); err != nil {
		t.Fatalf("the sample is invalid: %v", err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := loadSample(t)
			tc.change(f)
			err := f.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v\nwant one containing %q", err, tc.want)
			}
			if n := strings.Count(fmt.Sprint(err), "\n") + 1; n != 1 {
				t.Errorf("%d errors, want this one alone: %v", n, err)
			}
		})
	}
}

func setQueue(f *serverconfig.File, name string, change func(q *serverconfig.Queue)) {
	q := f.Queues[name]
	change(&q)
	f.Queues[name] = q
}

// inQueue returns a change of the queue name.
func inQueue(name string, change func(q *serverconfig.Queue)) func(f *serverconfig.File) {
	return func(f *serverconfig.File) { setQueue(f, name, change) }
}

// Validate reports every mistake at once, each on its own line.
func TestValidateReportsEveryMistake(t *testing.T) {
	f := loadSample(t)
	f.MaxConnections = -1
	setQueue(f, "emails", func(q *serverconfig.Queue) { q.URL = "" })
	f.Principals[0].Grants[0].Role = "boss"
	err := f.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "max_connections") || !strings.HasPrefix(lines[1], "queues.emails.url") || !strings.HasPrefix(lines[2], "principal shop: grants[0]") {
		t.Errorf("err =\n%v", err)
	}
	if !errors.Is(err, rdq.ErrInvalid) {
		t.Errorf("%v does not wrap rdq.ErrInvalid", err)
	}
	f.Principals[0].Grants[0].Role = "submitter"
	if err := f.Validate(); !errors.Is(err, rdq.ErrInvalid) || strings.Contains(err.Error(), "rdq: invalid input") {
		t.Errorf("%v: want rdq.ErrInvalid wrapped, its text not repeated", err)
	}
}

// A file that is not a configuration is an error naming the line and the
// setting, not one naming Go types.
func TestParseErrorsNameThePlace(t *testing.T) {
	clearEnv(t)
	sample := string(readSample(t))
	cases := map[string]struct{ from, to, want string }{
		"syntax":       {`"grpc_listen": "127.0.0.1:9090",`, `"grpc_listen": "127.0.0.1:9090",,`, "line 3, column 35: the file is not valid JSON: invalid character ','"},
		"type":         {`"max_attempts": 3,`, `"max_attempts": "3",`, "line 23, column 25: queues.max_attempts must be a whole number, not a string"},
		"array":        {`"handlers": ["send"],`, `"handlers": "send",`, "line 31, column 24: queues.handlers must be an array, not a string"},
		"unknown":      {`"max_attempts": 5,`, `"max_attempt": 5,`, `unknown setting "max_attempt": check its spelling and section against the sample configuration`},
		"duration":     {`"timeout": "10s"`, `"timeout": "10"`, `"10" is not a duration: use a number and a unit (ms, s, m, h), such as "30s"`},
		"not a string": {`"timeout": "10s"`, `"timeout": 10`, `10 is not a duration: write one as a string such as "30s"`},
		"trailing":     {"  ]\n}", "  ]\n}\n{}", "line 47: more after the configuration's closing brace: the file must hold one JSON object"},
		"truncated":    {"  ]\n}", "  ]\n", "the file ends before its JSON object does"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(sample, tc.from) {
				t.Fatalf("the sample lacks %q", tc.from)
			}
			_, err := serverconfig.Parse([]byte(strings.Replace(sample, tc.from, tc.to, 1)))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, rdq.ErrInvalid) {
				t.Errorf("err = %v\nwant one containing %q, wrapping rdq.ErrInvalid", err, tc.want)
			}
		})
	}
	if _, err := serverconfig.Parse(nil); err == nil || !strings.Contains(err.Error(), "the file ends before its JSON object does") {
		t.Errorf("empty file: %v", err)
	}
}

// Load names the file in its errors; defaults fill in what a file leaves
// out.
func TestLoad(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	if _, err := serverconfig.Load(filepath.Join(dir, "missing.json")); err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "reading the configuration") {
		t.Errorf("missing file: %v", err)
	}
	path := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(path, []byte(`{"queues": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := serverconfig.Load(path); err == nil || !strings.HasPrefix(err.Error(), path+": ") {
		t.Errorf("err = %v, want one starting with the path", err)
	}
	minimal := strings.NewReplacer(`"listen": "127.0.0.1:8080",`, "", `"grpc_listen": "127.0.0.1:9090",`, "").Replace(string(readSample(t)))
	if err := os.WriteFile(path, []byte(minimal), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := serverconfig.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Listen != serverconfig.DefaultListen || f.GRPCListen != serverconfig.DefaultGRPCListen {
		t.Errorf("defaults: %q %q", f.Listen, f.GRPCListen)
	}
}

// The sample's change-me secrets are refused unless in development mode,
// where they are a warning; real ones from the environment pass.
func TestSampleSecrets(t *testing.T) {
	f := loadSample(t)
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	err := f.CheckSecrets(false, log)
	if err == nil {
		t.Fatal("the sample secrets were accepted outside development mode")
	}
	for _, want := range []string{"callback.secret (set RDQ_CALLBACK_SECRET)", "the token of shop (set RDQ_TOKEN_SHOP)", "the token of oncall (set RDQ_TOKEN_ONCALL)", "the token of root", "-dev"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if logged.Len() != 0 {
		t.Errorf("logged outside development mode: %s", logged.String())
	}
	if err := f.CheckSecrets(true, log); err != nil {
		t.Errorf("development mode: %v", err)
	}
	if !strings.Contains(logged.String(), "DEVELOPMENT MODE") || !strings.Contains(logged.String(), "the token of root") {
		t.Errorf("development mode did not warn: %s", logged.String())
	}

	t.Setenv("RDQ_CALLBACK_SECRET", "a-real-callback-secret-0123456789")
	t.Setenv("RDQ_TOKEN_SHOP", "gziTmoPY8qnYNV4cvGouovbm3lpDS4wGHEEBU8stl8Y")
	t.Setenv("RDQ_TOKEN_ONCALL", "vNGhXYdV_zKOOAk3mdZGHljakQdg3hgCqLVtgLvUjxw")
	t.Setenv("RDQ_TOKEN_ROOT", "7zmq04XSb77RUMSmx6-FXVALBcDt7pFpJbUbe4u_apY")
	real, err := serverconfig.Parse(readSample(t))
	if err != nil {
		t.Fatal(err)
	}
	if weak := real.SampleSecrets(); len(weak) != 0 {
		t.Errorf("SampleSecrets() = %q with real secrets", weak)
	}
	if err := real.CheckSecrets(false, log); err != nil {
		t.Errorf("real secrets from the environment: %v", err)
	}

	setQueue(real, "orders", func(q *serverconfig.Queue) { q.Secret = "Orders-ChangeMe-secret" })
	real.MetricsToken = "metrics_change_me_0123456789abcdef"
	if got, want := real.SampleSecrets(), []string{"queue orders secret (set its secret)", "metrics_token (set RDQ_METRICS_TOKEN)"}; !slices.Equal(got, want) {
		t.Errorf("SampleSecrets() = %q, want %q", got, want)
	}
}

// Flags take the file's path and development mode from the command line.
func TestFlags(t *testing.T) {
	clearEnv(t)
	var fl serverconfig.Flags
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fl.Register(fs, "missing.json")
	if fl.Path != "missing.json" || fl.Dev {
		t.Errorf("defaults: %+v", fl)
	}
	log := slog.New(slog.DiscardHandler)
	if err := fs.Parse([]string{"-config", "testdata/sample.json"}); err != nil {
		t.Fatal(err)
	}
	if _, err := fl.Load(log); err == nil || !strings.Contains(err.Error(), "refusing to start with sample secrets") {
		t.Errorf("without -dev: %v", err)
	}
	if err := fs.Parse([]string{"-dev"}); err != nil {
		t.Fatal(err)
	}
	f, err := fl.Load(log)
	if err != nil || len(f.Queues) != 2 {
		t.Errorf("with -dev: %v", err)
	}
}

// A Duration is written as Go writes durations, and read back.
func TestDurationRoundTrip(t *testing.T) {
	in := serverconfig.Queue{Timeout: serverconfig.Duration(90 * time.Second)}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"timeout":"1m30s"`)) {
		t.Errorf("marshalled %s", b)
	}
	var out serverconfig.Queue
	if err := json.Unmarshal(b, &out); err != nil || out.Timeout != in.Timeout {
		t.Errorf("round trip: %v %v", out.Timeout, err)
	}
}

// Behind proxies, the console names its clients by the header the trusted
// proxies write; without the settings, by the remote address.
func TestConsoleConfig(t *testing.T) {
	f := loadSample(t)
	f.ConsoleTrustedOrigins = []string{"https://rdq.example.com"}
	cfg, err := f.ConsoleConfig()
	if err != nil || cfg.ClientAddr != nil || !slices.Equal(cfg.TrustedOrigins, f.ConsoleTrustedOrigins) {
		t.Fatalf("without proxies: %+v, %v", cfg, err)
	}
	f.ConsoleClientHeader, f.ConsoleTrustedProxies = "X-Forwarded-For", []string{"10.0.0.0/8"}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg, err = f.ConsoleConfig(); err != nil || cfg.ClientAddr == nil {
		t.Fatalf("behind proxies: %+v, %v", cfg, err)
	}
	r := httptest.NewRequest(http.MethodPost, "/console/signin", nil)
	r.RemoteAddr = "10.0.0.5:1234"
	r.Header.Set("X-Forwarded-For", "192.0.2.1, 198.51.100.7")
	if got := cfg.ClientAddr(r); got != "198.51.100.7" {
		t.Errorf("client behind the proxy: %q", got)
	}
}
