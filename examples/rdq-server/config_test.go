package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/srjn45/rdq/callback"
	"github.com/srjn45/rdq/server"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The sample configuration loads, and everything built from it is valid.
func TestSampleConfig(t *testing.T) {
	t.Setenv("RDQ_DATABASE_URL", "")
	t.Setenv("RDQ_TOKEN_SHOP", "env-ROIEtgFOUmjNQZDl0vLrYoS24d8qgJvZjSbTleyKGVw")
	cfg, err := loadConfig("config.json")
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := cfg.tokens()
	if err != nil {
		t.Fatal(err)
	}
	shop, err := tokens.Authenticate(context.Background(), "env-ROIEtgFOUmjNQZDl0vLrYoS24d8qgJvZjSbTleyKGVw")
	if err != nil || shop.Name != "shop" || !shop.Can(server.RoleSubmitter, "orders") || shop.Can(server.RoleOperator, "orders") {
		t.Errorf("shop: %+v %v", shop, err)
	}
	if _, err := tokens.Authenticate(context.Background(), "dev-submitter-change-me-eQARNuyd8TUys086A0FlB7W6"); err == nil {
		t.Error("the literal token still works although the environment overrides it")
	}
	root, err := tokens.Authenticate(context.Background(), "dev-admin-change-me-LBHf7G7WxI3NyMtJHvgoVR-5")
	if err != nil || !root.CanAll(server.RoleAdmin) {
		t.Errorf("root: %+v %v", root, err)
	}
	q := cfg.workerQueues()["orders"]
	if q.Policy.MaxAttempts != 3 || q.Policy.InitialBackoff != time.Second || q.Timeout != 15*time.Second || q.Concurrency != 4 {
		t.Errorf("orders queue: %+v", q)
	}
	if err := q.Policy.Validate(); err != nil {
		t.Error(err)
	}
	caller, err := callback.New(callback.Config{Secret: []byte(secret(cfg.Callback.Secret, cfg.Callback.SecretEnv)), Allow: cfg.Callback.Allow, AllowAddrs: cfg.Callback.AllowAddrs})
	if err != nil {
		t.Fatal(err)
	}
	defer caller.Close()
	if _, err := caller.Router(cfg.targets()); err != nil {
		t.Error(err)
	}
}

// Mistakes in the configuration are errors that name them, never a panic
// when the server is built.
func TestConfigMistakesAreErrors(t *testing.T) {
	sample, err := os.ReadFile("config.json")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct{ from, to, want string }{
		"handler typo":       {`"handlers": ["send"]`, `"handlers": ["se nd"]`, `queue emails: handlers: rdq: invalid input: handler name "se nd"`},
		"queue name":         {`"emails": {`, `"e mails": {`, `queue name "e mails"`},
		"no url":             {`"url": "http://127.0.0.1:9000/hooks/emails",`, ``, "queue emails: url is empty"},
		"negative workers":   {`"concurrency": 2`, `"concurrency": -2`, "queue emails: concurrency and timeout must not be negative"},
		"bad policy":         {`"max_attempts": 5`, `"max_attempts": -5`, "queue emails:"},
		"unknown role":       {`"role": "operator"`, `"role": "root"`, `principals: principal oncall: rdq: invalid input: role "root"`},
		"bad grant":          {`{"queue": "*", "role": "operator"}`, `{"queue": "a b", "role": "operator"}`, "principals:"},
		"weak metrics token": {`"metrics_token_env": "RDQ_METRICS_TOKEN",`, `"metrics_token": "metrics",`, "metrics_token: rdq: invalid input: the token is 7 bytes"},
		"weak token":         {`"token": "dev-operator-change-me-caHfrMSWTiwafjcpBNiaCpAD"`, `"token": "aaaaaaaaaaaaaaaa"`, "principals: the token of oncall: rdq: invalid input: the token is 16 bytes: use at least 32 random characters, such as the output of `openssl rand -base64 32`"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(string(sample), tc.from) {
				t.Fatalf("config.json lacks %s", tc.from)
			}
			path := filepath.Join(t.TempDir(), "config.json")
			if err := os.WriteFile(path, []byte(strings.Replace(string(sample), tc.from, tc.to, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := loadConfig(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// The sample's change-me secrets are refused unless -dev is given.
func TestSampleSecretsNeedDevMode(t *testing.T) {
	for _, v := range []string{"RDQ_DATABASE_URL", "RDQ_CALLBACK_SECRET", "RDQ_TOKEN_SHOP", "RDQ_TOKEN_ONCALL", "RDQ_TOKEN_ROOT"} {
		t.Setenv(v, "")
	}
	cfg, err := loadConfig("config.json")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	err = cfg.checkSecrets(false, log)
	if err == nil {
		t.Fatal("the sample secrets were accepted without -dev")
	}
	for _, want := range []string{"callback.secret (set RDQ_CALLBACK_SECRET)", "the token of shop (set RDQ_TOKEN_SHOP)", "the token of oncall", "the token of root", "-dev"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if err := cfg.checkSecrets(true, log); err != nil {
		t.Errorf("-dev: %v", err)
	}
	t.Setenv("RDQ_CALLBACK_SECRET", "a-real-callback-secret-0123456789")
	t.Setenv("RDQ_TOKEN_SHOP", "gziTmoPY8qnYNV4cvGouovbm3lpDS4wGHEEBU8stl8Y")
	t.Setenv("RDQ_TOKEN_ONCALL", "vNGhXYdV_zKOOAk3mdZGHljakQdg3hgCqLVtgLvUjxw")
	t.Setenv("RDQ_TOKEN_ROOT", "7zmq04XSb77RUMSmx6-FXVALBcDt7pFpJbUbe4u_apY")
	if err := cfg.checkSecrets(false, log); err != nil {
		t.Errorf("real secrets from the environment: %v", err)
	}
}
