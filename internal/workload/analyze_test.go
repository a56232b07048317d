package workload

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/srjn45/rdq/internal/pgtest"
)

// TestAnalyzeTakesAStoreURL checks that Analyze connects with the URL a
// store opens, pool settings included.
func TestAnalyzeTakesAStoreURL(t *testing.T) {
	_, schema := pgtest.NewStore(t)
	url := pgtest.URL()
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Analyze(ctx, url+sep+"pool_max_conns=3&pool_max_conn_idle_time=1m", schema); err != nil {
		t.Fatal(err)
	}
}
