package console_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/srjn45/rdq/console"
	"github.com/srjn45/rdq/sqlitestore"
)

// Mount the console under /ops/rdq/ of an existing mux, letting a signed-in
// "ops" team read everything and redrive, and nobody else do anything.
func Example() {
	dir, err := os.MkdirTemp("", "rdq-console-example-")
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

	// Your own sign-in decides who the person is; here a header stands in.
	team := func(r *http.Request) string { return r.Header.Get("X-Team") }
	c, err := console.New(console.Config{
		Store:  st,
		Prefix: "/ops/rdq",
		Authorize: func(r *http.Request, a console.Action, queue string) error {
			if team(r) == "ops" && (a == console.ActionRead || a == console.ActionRedrive) {
				return nil
			}
			return errors.New("ask the ops team")
		},
		Actor: func(r *http.Request) string { return "ops:" + r.Header.Get("X-User") },
	})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	mux := http.NewServeMux()
	mux.Handle("/ops/rdq/", c)

	for _, who := range []string{"ops", "sales"} {
		req := httptest.NewRequest("GET", "/ops/rdq/dead", nil)
		req.Header.Set("X-Team", who)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		fmt.Println(who, rec.Code)
	}
	// Output:
	// ops 200
	// sales 403
}
