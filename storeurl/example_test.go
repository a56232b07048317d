package storeurl_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/storeurl"
)

func ExampleDescribe() {
	fmt.Println(storeurl.Describe("postgres://app:secret@db.internal:5432/jobs?schema=rdq"))
	fmt.Println(storeurl.Describe("sqlite:/var/lib/app/rdq.db"))
	// Output:
	// PostgreSQL at postgres://app:xxxxx@db.internal:5432/jobs (schema rdq)
	// SQLite at /var/lib/app/rdq.db
}

// Redact shows a URL without its secrets: the password and every query
// value not known to be harmless.
func ExampleRedact() {
	fmt.Println(storeurl.Redact("postgres://app:secret@db.internal/jobs?sslmode=verify-full&sslpassword=hunter2&api_token=t0k3n"))
	// Output:
	// postgres://app:xxxxx@db.internal/jobs?api_token=xxxxx&sslmode=verify-full&sslpassword=xxxxx
}

// Open connects to the database a URL names and migrates it; here a SQLite
// file. An empty URL means rdq's per-user default file, and a postgres://
// URL a PostgreSQL database.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "storeurl-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	url := "sqlite:" + filepath.Join(dir, "rdq.db")

	st, err := storeurl.Open(context.Background(), url, storeurl.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	stats, err := st.Stats(context.Background(), store.StatsParams{})
	fmt.Println(len(stats), err)
	// Output: 0 <nil>
}
