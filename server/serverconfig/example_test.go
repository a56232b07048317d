package serverconfig_test

import (
	"fmt"

	"github.com/srjn45/rdq/server/serverconfig"
)

// Parse checks a configuration and reports every mistake at once, each
// naming its setting; a valid one yields what the server is built from.
func ExampleParse() {
	_, err := serverconfig.Parse([]byte(`{
	  "callback": {"secret": "callbacks-are-signed-with-this", "allow": ["hooks.internal"]},
	  "queues": {"orders": {"url": "https://hooks.example.com/orders", "handlers": ["charge"], "concurrency": -1}},
	  "principals": [{"name": "shop", "token": "short", "grants": [{"queue": "orders", "role": "writer"}]}]
	}`))
	fmt.Println(err)

	f, err := serverconfig.Parse([]byte(`{
	  "callback": {"secret": "callbacks-are-signed-with-this", "allow": ["hooks.internal"]},
	  "queues": {"orders": {"url": "https://hooks.internal/orders", "handlers": ["charge", "refund"], "max_attempts": 5}},
	  "principals": [{"name": "shop", "token": "Vb9k2QpZ7xLm4TnR8sWc1YdF6hJg3KaE", "grants": [{"queue": "orders", "role": "submitter"}]}]
	}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(f.Listen, f.Handlers(), f.WorkerQueues()["orders"].Policy.MaxAttempts, f.Targets()["orders"].URL)
	// Output:
	// queues.orders.url: rdq: invalid input: callback: target is not on the allowlist: https://hooks.example.com/orders: list it (or a prefix of it) in callback.allow
	// queues.orders.concurrency is -1: use a positive number, or 0 for the default (10)
	// principal shop: grants[0]: rdq: invalid input: role "writer": use submitter, operator or admin
	// principal shop: token: rdq: invalid input: the token is 5 bytes: use at least 32 random characters, such as the output of `openssl rand -base64 32`
	// 127.0.0.1:8080 [charge refund] 5 https://hooks.internal/orders
}
