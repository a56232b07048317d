package main

import (
	"context"
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
	t.Setenv("RDQ_TOKEN_SHOP", "a-token-from-the-environment")
	cfg, err := loadConfig("config.json")
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := cfg.tokens()
	if err != nil {
		t.Fatal(err)
	}
	shop, err := tokens.Authenticate(context.Background(), "a-token-from-the-environment")
	if err != nil || shop.Name != "shop" || !shop.Can(server.RoleSubmitter, "orders") || shop.Can(server.RoleOperator, "orders") {
		t.Errorf("shop: %+v %v", shop, err)
	}
	if _, err := tokens.Authenticate(context.Background(), "dev-submitter-token-change-me"); err == nil {
		t.Error("the literal token still works although the environment overrides it")
	}
	root, err := tokens.Authenticate(context.Background(), "dev-admin-token-change-me")
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
