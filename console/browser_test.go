package console_test

// Browser end-to-end tests: Chromium, driven through the DevTools protocol
// by chromedp, clicks through the console mounted under /ops/rdq/ while a
// real worker runs the redriven tasks.
//
// They need Chromium or Chrome on PATH (Debian: apt-get install -y
// chromium), or at RDQ_CHROMIUM. Without it they skip, except under CI=true
// where they fail. RDQ_CONSOLE_SCREENSHOTS=DIR keeps a screenshot of each
// main page in DIR.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/console"
	"github.com/srjn45/rdq/internal/pgtest"
	"github.com/srjn45/rdq/pgstore"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/worker"
)

const browserPrefix = "/ops/rdq"

// chromiumBinaries are the names Chromium and Chrome install under, looked
// up on PATH in this order.
var chromiumBinaries = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"}

// chromiumPath returns the browser to drive: RDQ_CHROMIUM, else the first of
// chromiumBinaries on PATH. Without one it fails under CI=true and skips
// otherwise.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("RDQ_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("RDQ_CHROMIUM names %s, which is not there: %v", p, err)
		}
		return p
	}
	for _, name := range chromiumBinaries {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("Chromium is required for the console's browser tests under CI and none of %v is on PATH (apt-get install -y chromium, or set RDQ_CHROMIUM)", chromiumBinaries)
	}
	t.Skipf("none of %v is on PATH (apt-get install -y chromium, or set RDQ_CHROMIUM); the browser tests are skipped", chromiumBinaries)
	return ""
}

// browserEnv is the console under /ops/rdq/ with a sign-in shortcut
// (/login?user=NAME sets the test principal's cookie), a PostgreSQL store
// and a worker that runs the console's redrives.
type browserEnv struct {
	t      *testing.T
	s      *pgstore.Store
	base   string // http://127.0.0.1:port
	ctx    context.Context
	shots  string
	worker *worker.Worker
}

func newBrowserEnv(t *testing.T) *browserEnv {
	t.Helper()
	chromium := chromiumPath(t)
	s, _ := pgtest.NewStore(t)
	c, err := console.New(console.Config{Store: s, Prefix: browserPrefix + "/", Authorize: authorize, Actor: actor})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/login", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "test-user", Value: r.URL.Query().Get("user"), Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		http.Redirect(w, r, browserPrefix+"/", http.StatusSeeOther)
	})
	mux.Handle(browserPrefix+"/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del("X-Test-User")
		if ck, err := r.Cookie("test-user"); err == nil {
			r.Header.Set("X-Test-User", ck.Value)
		}
		c.ServeHTTP(w, r)
	}))
	srv := httptest.NewServer(mux)

	w, err := worker.New(worker.Config{
		Store: s, ID: "browser-test-worker", PollInterval: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
		Queues: map[string]worker.QueueConfig{"emails": {Concurrency: 2}, "billing": {Concurrency: 2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// send fails for the address "bad"; charge always succeeds.
	if err := w.Handle("send", func(_ context.Context, task *rdq.Task) error {
		var p struct{ To string }
		if err := json.Unmarshal(task.Payload, &p); err != nil || p.To == "bad" {
			return rdq.Permanent(errors.New("bad address"))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("charge", func(context.Context, *rdq.Task) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}

	dir := os.Getenv("RDQ_CONSOLE_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	// A fresh profile, removed once the browser is gone (its helpers may
	// still be writing to it for a moment after the allocator returns).
	profile, err := os.MkdirTemp("", "rdq-console-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(profile),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
		removeProfile(t, profile)
		srv.Close()
		stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Stop(stopCtx); err != nil {
			t.Error(err)
		}
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	return &browserEnv{t: t, s: s, base: srv.URL, ctx: ctx, shots: dir, worker: w}
}

// removeProfile removes the browser profile, retrying while the browser's
// last processes finish writing to it.
func removeProfile(t *testing.T, dir string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := os.RemoveAll(dir)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("removing the browser profile: %v", err)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (b *browserEnv) run(actions ...chromedp.Action) {
	b.t.Helper()
	if err := chromedp.Run(b.ctx, actions...); err != nil {
		b.t.Fatal(err)
	}
}

// screenshot saves the full page as DIR/name.png.
func (b *browserEnv) screenshot(name string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		var png []byte
		if err := chromedp.FullScreenshot(&png, 100).Do(ctx); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644)
	})
}

func (b *browserEnv) login(user string) {
	b.t.Helper()
	b.run(chromedp.Navigate(b.base+"/login?user="+user), chromedp.WaitVisible(`main`, chromedp.ByQuery))
}

// waitStatus polls the store until every task has the status.
func (b *browserEnv) waitStatus(status rdq.Status, ids ...rdq.ID) {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, id := range ids {
		for {
			task, _, err := b.s.Get(context.Background(), id)
			if err != nil {
				b.t.Fatal(err)
			}
			if task.Status == status {
				break
			}
			if time.Now().After(deadline) {
				b.t.Fatalf("task %s is %s, want %s", id, task.Status, status)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func (b *browserEnv) text(sel string) string {
	b.t.Helper()
	var s string
	b.run(chromedp.Text(sel, &s, chromedp.ByQuery))
	return s
}

func (b *browserEnv) dead(spec deadSpec) rdq.ID { b.t.Helper(); return addDead(b.t, b.s, spec) }

func TestBrowserFilterGroupBulkRedrive(t *testing.T) {
	b := newBrowserEnv(t)
	var group []rdq.ID
	for i := range 3 {
		group = append(group, b.dead(deadSpec{queue: "emails", handler: "send", errType: "timeout", msg: "relay down", payload: fmt.Sprintf(`{"to":"user%d@example.com"}`, i)}))
	}
	b.dead(deadSpec{queue: "billing", handler: "charge", errType: "timeout", msg: "relay down"})
	b.dead(deadSpec{queue: "emails", handler: "send", errType: "validation", msg: "address rejected", payload: `{"to":"bad"}`})

	b.login(userAdmin)
	b.run(chromedp.WaitVisible(`svg.chart`, chromedp.ByQuery), b.screenshot("overview"))

	// The page's scripts run under the CSP, and live refresh picks up a
	// task that dies while the page is open.
	var scripted bool
	b.run(chromedp.Evaluate(`typeof window.htmx === 'object' && document.documentElement.classList.contains('js')`, &scripted))
	if !scripted {
		t.Fatal("htmx or the console's script did not run")
	}
	b.run(chromedp.Evaluate(`(() => { const s = document.getElementById('refresh'); s.value = '2'; s.dispatchEvent(new Event('change')); return true; })()`, &scripted))
	b.dead(deadSpec{queue: "billing", handler: "charge", errType: "timeout", msg: "relay down"})
	pollCtx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Run(pollCtx, chromedp.Poll(`document.querySelector('a[href$="/dead?queue=billing"]').textContent === '2'`, nil)); err != nil {
		t.Fatalf("live refresh did not show the new dead task: %v", err)
	}

	// Filter the groups to the emails queue, open the biggest group.
	b.run(
		chromedp.Navigate(b.base+browserPrefix+"/groups"),
		chromedp.SetValue(`form.filters input[name="queue"]`, "emails", chromedp.ByQuery),
		chromedp.Submit(`form.filters`, chromedp.ByQuery),
		chromedp.WaitVisible(`table.groups a.count`, chromedp.ByQuery),
	)
	if s := b.text(`p.summary`); !strings.Contains(s, "4 dead tasks in 2 groups") {
		t.Fatalf("groups summary %q", s)
	}
	b.run(b.screenshot("groups"), chromedp.Click(`table.groups tbody tr:first-child a.count`, chromedp.ByQuery), chromedp.WaitVisible(`table.tasks`, chromedp.ByQuery))
	var loc string
	b.run(chromedp.Location(&loc))
	if !strings.Contains(loc, "queue=emails") || !strings.Contains(loc, "fingerprint="+rdq.Fingerprint("timeout", "relay down")) {
		t.Fatalf("the group opened %s", loc)
	}
	if s := b.text(`p.summary`); !strings.Contains(s, "3 dead tasks match") {
		t.Fatalf("list summary %q", s)
	}
	b.run(b.screenshot("dead"))

	// Bulk: dry run, confirmation naming the count and filter, redrive.
	b.run(
		chromedp.Click(`a.button[href*="op=redrive"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`form.bulk`, chromedp.ByQuery),
		chromedp.SetValue(`form.bulk input[name="spread"]`, "1s", chromedp.ByQuery),
		chromedp.Click(`form.bulk button[type="submit"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`form.confirm`, chromedp.ByQuery),
	)
	if s := b.text(`p.confirmline`); !strings.Contains(s, "redrive 3 dead tasks") || !strings.Contains(s, "queue=emails fingerprint=") {
		t.Fatalf("confirmation %q", s)
	}
	b.run(b.screenshot("bulk-confirm"),
		chromedp.SetValue(`form.confirm input[name="reason"]`, "relay fixed, INC-7", chromedp.ByQuery),
		chromedp.Click(`form.confirm button[type="submit"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`section.summary`, chromedp.ByQuery),
	)
	if s := b.text(`section.summary`); !strings.Contains(s, "3 tasks redriven") {
		t.Fatalf("summary %q", s)
	}
	b.run(b.screenshot("bulk-done"))
	b.waitStatus(rdq.StatusSucceeded, group...)

	// The redriven tasks are listed among the succeeded live tasks.
	var jobURL string
	b.run(chromedp.Location(&jobURL), chromedp.Navigate(b.base+browserPrefix+"/live?state=succeeded&queue=emails"), chromedp.WaitVisible(`table.tasks`, chromedp.ByQuery))
	var listed int
	b.run(chromedp.Evaluate(`document.querySelectorAll('table.tasks a[href*="/tasks/"]').length`, &listed), b.screenshot("live"))
	if listed != len(group) {
		t.Errorf("%d succeeded tasks listed, want %d", listed, len(group))
	}
	// The current tab reads as chosen, the others do not; each task id
	// has its copy button.
	var weights []string
	var copies int
	b.run(chromedp.Evaluate(`Array.from(document.querySelectorAll('nav.tabs a')).map(a => (a.hasAttribute('aria-current') ? 'current ' : '') + getComputedStyle(a).fontWeight)`, &weights),
		chromedp.Evaluate(`document.querySelectorAll('table.tasks button.copy[data-copy]').length`, &copies))
	if strings.Join(weights, ",") != "400,400,400,400,current 600" {
		t.Errorf("the live tabs' weights: %q, want the current (succeeded) one alone bold", weights)
	}
	if copies != len(group) {
		t.Errorf("%d copy buttons for %d tasks", copies, len(group))
	}
	b.run(chromedp.Navigate(jobURL), chromedp.WaitVisible(`section.summary`, chromedp.ByQuery))

	// The summary links to the audit entries of the action.
	b.run(chromedp.Click(`section.summary a`, chromedp.ByQuery), chromedp.WaitVisible(`table.audit`, chromedp.ByQuery))
	if s := b.text(`table.audit tbody`); !strings.Contains(s, "relay fixed, INC-7") || !strings.Contains(s, "admin") {
		t.Fatalf("audit %q", s)
	}
	b.run(b.screenshot("audit"))
}

func TestBrowserEditPayloadAndRedrive(t *testing.T) {
	b := newBrowserEnv(t)
	id := b.dead(deadSpec{queue: "emails", handler: "send", errType: "validation", msg: "address rejected", payload: `{"to":"bad"}`,
		stack: "goroutine 7 [running]:\nmain.send(...)\n\t/src/send.go:12"})
	b.login(userOperator)
	b.run(
		chromedp.Navigate(b.base+browserPrefix+"/tasks/"+id.String()),
		chromedp.WaitVisible(`pre.payload`, chromedp.ByQuery),
		b.screenshot("task"),
		chromedp.Click(`details.edit summary`, chromedp.ByQuery),
		chromedp.SetValue(`#payload`, `{"to": "good@example.com"}`, chromedp.ByQuery),
		chromedp.Click(`details.edit button[type="submit"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`pre.diff`, chromedp.ByQuery),
	)
	if s := b.text(`pre.diff`); !strings.Contains(s, `-   "to": "bad"`) || !strings.Contains(s, `+ {"to": "good@example.com"}`) {
		t.Fatalf("diff %q", s)
	}
	b.run(b.screenshot("edit-diff"),
		chromedp.SetValue(`form.confirm input[name="reason"]`, "typo in address", chromedp.ByQuery),
		chromedp.Click(`form.confirm button[type="submit"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`p.notice`, chromedp.ByQuery),
	)
	b.waitStatus(rdq.StatusSucceeded, id)
	// The history shows both lives, and the audit entry.
	b.run(chromedp.Reload(), chromedp.WaitVisible(`section.life`, chromedp.ByQuery))
	var lives int
	b.run(chromedp.Evaluate(`document.querySelectorAll('section.life').length`, &lives))
	if lives != 2 {
		t.Errorf("%d lives shown, want 2", lives)
	}
	if s := b.text(`table.audit`); !strings.Contains(s, "edit_payload") || !strings.Contains(s, "operator") {
		t.Errorf("task audit %q", s)
	}
	b.run(b.screenshot("task-after"))

	// The dark theme follows the system setting.
	var bg string
	b.run(emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}),
		chromedp.Evaluate(`getComputedStyle(document.body).backgroundColor`, &bg), b.screenshot("task-dark"))
	if bg != "rgb(21, 23, 26)" {
		t.Errorf("dark background %q", bg)
	}
}

func TestBrowserReadOnlyAndForgedPosts(t *testing.T) {
	b := newBrowserEnv(t)
	id := b.dead(deadSpec{queue: "billing", handler: "nobody", errType: "x", msg: "y"})
	b.login(userReader)
	for _, p := range []string{"/", "/dead", "/groups", "/tasks/" + id.String()} {
		var controls int
		b.run(chromedp.Navigate(b.base+browserPrefix+p), chromedp.WaitVisible(`main`, chromedp.ByQuery),
			chromedp.Evaluate(`document.querySelectorAll('form[method="post"], a.button, button[type="submit"]:not(form[method="get"] button)').length`, &controls))
		if controls != 0 {
			t.Errorf("%s shows %d mutating controls to a read-only principal", p, controls)
		}
	}
	// A forged POST from the reader's own page is refused by the hook.
	var status int
	b.run(chromedp.Evaluate(fmt.Sprintf(`fetch(%q, {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'}, body: 'reason=forged'}).then(r => r.status)`,
		browserPrefix+"/tasks/"+id.String()+"/purge"), &status, awaitPromise))
	if status != http.StatusForbidden {
		t.Errorf("forged POST: %d, want 403", status)
	}
	b.waitStatus(rdq.StatusDead, id)
}

func TestBrowserCrossOriginPostIsRefused(t *testing.T) {
	b := newBrowserEnv(t)
	id := b.dead(deadSpec{queue: "billing", handler: "nobody", errType: "x", msg: "y"})
	b.login(userAdmin)
	// Another origin (localhost instead of 127.0.0.1) with a page that
	// posts a purge to the console as soon as it loads.
	target := b.base + browserPrefix + "/tasks/" + id.String() + "/purge"
	evil := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><form method="post" action="%s"><input name="reason" value="forged"></form><script>document.forms[0].submit()</script>`, target)
	}))
	ln, err := net.Listen("tcp", "localhost:0")
	if err != nil {
		t.Fatal(err)
	}
	evil.Listener = ln
	evil.Start()
	defer evil.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	b.run(chromedp.Navigate("http://localhost:"+port+"/"), chromedp.WaitVisible(`main`, chromedp.ByQuery))
	var loc string
	b.run(chromedp.Location(&loc))
	if !strings.HasPrefix(loc, target) {
		t.Fatalf("the forged form did not reach the console: at %s", loc)
	}
	if s := b.text(`main`); !strings.Contains(s, "cross-origin request refused") {
		t.Errorf("cross-origin POST answered %q", s)
	}
	b.waitStatus(rdq.StatusDead, id)
}

// awaitPromise makes Evaluate wait for the promise the expression returns.
func awaitPromise(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }

func TestBrowserWorkersAndUnservedQueue(t *testing.T) {
	b := newBrowserEnv(t)
	if _, err := b.s.Enqueue(context.Background(), store.EnqueueParams{Tasks: []store.NewTask{
		{ID: rdq.NewID(), Queue: "reports", Handler: "build"},
	}}); err != nil {
		t.Fatal(err)
	}
	b.login(userAdmin)
	var row, unserved string
	b.run(chromedp.Navigate(b.base+browserPrefix+"/"), chromedp.WaitVisible(`a.badge.nolive`, chromedp.ByQuery),
		chromedp.Text(`ul.unserved`, &unserved, chromedp.ByQuery), b.screenshot("console-unserved"))
	if !strings.Contains(unserved, "1 task of handler build in queue reports") || !strings.Contains(unserved, "no worker has registered it") {
		t.Errorf("overview's unserved list: %q", unserved)
	}
	b.run(chromedp.Click(`a.badge.nolive`, chromedp.ByQuery), chromedp.WaitVisible(`table.workers`, chromedp.ByQuery),
		chromedp.Text(`table.workers tbody`, &row, chromedp.ByQuery))
	if !strings.Contains(row, "No worker is registered for this queue") {
		t.Errorf("workers of reports: %q", row)
	}
	b.run(chromedp.Click(`nav a[href$="/workers"]`, chromedp.ByQuery), chromedp.WaitVisible(`table.workers`, chromedp.ByQuery),
		chromedp.Text(`table.workers tbody`, &row, chromedp.ByQuery), b.screenshot("console-workers"))
	if !strings.Contains(row, "browser-test-worker") || !strings.Contains(row, "live") || !strings.Contains(row, "charge, send") {
		t.Errorf("workers page row: %q", row)
	}
}

// TestBrowserActivityOutage: an outage of queue payments, 30 minutes ago,
// reads on the Queues page and on the Activity page as permanent failures
// rising minute by minute to a peak and falling back to none.
func TestBrowserActivityOutage(t *testing.T) {
	b := newBrowserEnv(t)
	start := plantOutage(t, b.s, "payments", "charge")
	b.login(userAdmin)
	minutes := func() []int {
		t.Helper()
		var titles []string
		b.run(chromedp.Evaluate(`Array.from(document.querySelector('svg.series').querySelectorAll('g > title')).map(t => t.textContent)`, &titles))
		got := minuteFailures(t, "<title>"+strings.Join(titles, "</title><title>")+"</title>")
		var out []int
		for i := -3; i < len(outage)+3; i++ {
			out = append(out, got[start.Add(time.Duration(i)*time.Minute).Format("15:04")])
		}
		return out
	}
	want := append(append([]int{0, 0, 0}, outage...), 0, 0, 0)
	b.run(chromedp.Navigate(b.base+browserPrefix+"/"), chromedp.WaitVisible(`svg.series`, chromedp.ByQuery), b.screenshot("console-overview"))
	if got := minutes(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the Queues page's minutes around the outage: %v, want %v", got, want)
	}
	b.run(chromedp.Click(`a[aria-label="Activity of payments"]`, chromedp.ByQuery), chromedp.WaitVisible(`table.activity`, chromedp.ByQuery),
		b.screenshot("console-activity"))
	if got := minutes(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the Activity page's minutes around the outage: %v, want %v", got, want)
	}
	if h1, nav := b.text(`h1`), b.text(`nav a[aria-current="page"]`); h1 != "Activity of queue payments" || nav != "Activity" {
		t.Errorf("activity page heading %q, nav marks %q", h1, nav)
	}
	rows := b.text(`table.activity tbody`)
	if !strings.Contains(rows, "payments") || !strings.Contains(rows, "charge") || strings.Contains(rows, "other") {
		t.Errorf("the lines of payments: %q", rows)
	}
	// The dark theme keeps the outcomes apart.
	var okFill, permFill string
	b.run(emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}),
		chromedp.Evaluate(`getComputedStyle(document.querySelector('svg.series rect.ok')).fill`, &okFill),
		chromedp.Evaluate(`getComputedStyle(document.querySelector('svg.series rect.perm')).fill`, &permFill),
		b.screenshot("console-activity-dark"))
	if okFill == "" || okFill == permFill {
		t.Errorf("dark theme: successes drawn %q, permanent failures %q", okFill, permFill)
	}
}

// TestBrowserHeldHandler: a queue whose handler its breaker paused reads
// as holding that handler, not as running, and the breaker links to the
// tasks waiting after its failure.
func TestBrowserHeldHandler(t *testing.T) {
	b := newBrowserEnv(t)
	b.dead(deadSpec{queue: "payments", handler: "charge", errType: "net.OpError", msg: "connection refused"})
	if _, err := b.s.PauseHandler(context.Background(), store.PauseHandlerParams{Queue: "payments", Handler: "charge", CoolOff: time.Minute,
		Actor: "breaker", Reason: "20 tasks failed alike", Fingerprint: rdq.Fingerprint("net.OpError", "connection refused")}); err != nil {
		t.Fatal(err)
	}
	b.login(userAdmin)
	b.run(chromedp.Navigate(b.base+browserPrefix+"/"), chromedp.WaitVisible(`table.breakers`, chromedp.ByQuery), b.screenshot("console-breaker"))
	var state string
	b.run(chromedp.Text(`//table[contains(@class,"queues")]//tr[th[normalize-space()="payments"]]/td[last()-1]`, &state, chromedp.BySearch))
	if !strings.Contains(state, "charge held") || strings.Contains(state, "running") {
		t.Errorf("the state of payments reads %q, want its handler held", state)
	}
	b.run(chromedp.Click(`//a[normalize-space()="tasks waiting after this failure"]`, chromedp.BySearch), chromedp.WaitVisible(`nav.tabs`, chromedp.ByQuery))
	if cur := b.text(`nav.tabs a[aria-current="page"]`); !regexp.MustCompile(`^Retrying [0-9]+$`).MatchString(cur) {
		t.Errorf("the breaker's link opens the %q tab, want Retrying with its count", cur)
	}
}

// TestBrowserNarrowNoSidewaysScroll: at 400 px wide no list page is wider
// than the screen, and lists are cards whose cells name their column.
func TestBrowserNarrowNoSidewaysScroll(t *testing.T) {
	b := newBrowserEnv(t)
	id := b.dead(deadSpec{queue: "payments", handler: "charge", errType: "*github.com/example/payments/internal/gateway.UpstreamUnavailableError",
		msg: strings.Repeat("upstream-gateway-returned-an-unexpected-status ", 8), stack: "goroutine 1 [running]:\nmain.charge()\n\t/src/" + strings.Repeat("very/", 30) + "charge.go:12"})
	plantOutage(t, b.s, "reports", "build")
	if _, err := b.s.Enqueue(context.Background(), store.EnqueueParams{Tasks: []store.NewTask{
		{ID: rdq.NewID(), Queue: "reports", Handler: "build", Payload: []byte(`{}`)},
	}}); err != nil {
		t.Fatal(err)
	}
	b.login(userAdmin)
	b.run(emulation.SetDeviceMetricsOverride(400, 860, 1, true))
	for _, page := range []string{"/", "/dead", "/groups", "/live", "/live?state=retrying", "/live?state=succeeded", "/workers", "/audit",
		"/activity", "/activity?queue=reports", "/tasks/" + id.String(), "/bulk?op=redrive&queue=payments"} {
		var width, inner int
		b.run(chromedp.Navigate(b.base+browserPrefix+page), chromedp.WaitVisible(`main`, chromedp.ByQuery),
			chromedp.Evaluate(`document.documentElement.scrollWidth`, &width),
			chromedp.Evaluate(`window.innerWidth`, &inner))
		if inner != 400 || width > inner {
			t.Errorf("%s at %d px wide is %d px wide: it scrolls sideways", page, inner, width)
		}
		if page == "/" {
			b.run(b.screenshot("console-narrow"))
		}
	}
	var label string
	b.run(chromedp.Navigate(b.base+browserPrefix+"/dead"), chromedp.WaitVisible(`table tbody td[data-label]`, chromedp.ByQuery),
		chromedp.Evaluate(`getComputedStyle(document.querySelector('table tbody td[data-label]'), '::before').content`, &label))
	if label == "" || label == "none" {
		t.Errorf("a card's cell shows no column label: %q", label)
	}
}

// TestBrowserCheckboxRedrive: ticking two of three dead tasks and
// redriving the selection redrives those two only.
func TestBrowserCheckboxRedrive(t *testing.T) {
	b := newBrowserEnv(t)
	var ids []rdq.ID
	for i := range 3 {
		ids = append(ids, b.dead(deadSpec{queue: "emails", handler: "send", errType: "timeout", msg: "relay down", payload: fmt.Sprintf(`{"to":"user%d@example.com"}`, i)}))
	}
	b.login(userAdmin)
	b.run(chromedp.Navigate(b.base+browserPrefix+"/dead?queue=emails"), chromedp.WaitVisible(`form#selection`, chromedp.ByQuery),
		chromedp.Click(`input[type="checkbox"][value="`+ids[0].String()+`"]`, chromedp.ByQuery),
		chromedp.Click(`input[type="checkbox"][value="`+ids[2].String()+`"]`, chromedp.ByQuery),
		b.screenshot("console-selection"),
		chromedp.Click(`form#selection button[value="redrive"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`form.bulk`, chromedp.ByQuery),
		chromedp.Click(`form.bulk button[type="submit"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`form.confirm`, chromedp.ByQuery))
	if s := b.text(`p.confirmline`); !strings.Contains(s, "redrive 2 dead tasks") || !strings.Contains(s, "ids=(2)") {
		t.Fatalf("confirmation %q", s)
	}
	b.run(chromedp.SetValue(`form.confirm input[name="reason"]`, "two of them", chromedp.ByQuery),
		chromedp.Click(`form.confirm button[type="submit"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`section.summary`, chromedp.ByQuery))
	b.waitStatus(rdq.StatusSucceeded, ids[0], ids[2])
	if tk, _, err := b.s.Get(context.Background(), ids[1]); err != nil || tk.Status != rdq.StatusDead {
		t.Errorf("the task left unticked: %v %v", tk, err)
	}
}

// TestBrowserWorkerAppearsAndGoesStale: a worker that registers is listed
// live with its host, pid, version, queues, handlers, slots and in-flight
// count; once it stops refreshing its entry it is marked stale.
func TestBrowserWorkerAppearsAndGoesStale(t *testing.T) {
	b := newBrowserEnv(t)
	reg, ok := store.RegistryOf(b.s)
	if !ok {
		t.Fatal("the store keeps no worker registry")
	}
	register := func(at time.Time) {
		t.Helper()
		if err := reg.RegisterWorker(context.Background(), store.RegisterWorkerParams{
			Worker: store.WorkerInfo{ID: "reports-worker-7", Host: "reports-host", PID: 4242, Version: "v9.9.9",
				Queues: []string{"reports"}, Handlers: []string{"build"}, Slots: 8, InFlight: 3},
			StaleAfter: 30 * time.Second, ExpireAfter: time.Hour, Now: &at,
		}); err != nil {
			t.Fatal(err)
		}
	}
	row := func() string {
		t.Helper()
		var s string
		b.run(chromedp.Navigate(b.base+browserPrefix+"/workers"), chromedp.WaitVisible(`table.workers`, chromedp.ByQuery),
			chromedp.Text(`//table[contains(@class,"workers")]//tr[th[normalize-space()="reports-worker-7"]]`, &s, chromedp.BySearch))
		return s
	}
	b.login(userAdmin)
	register(time.Now())
	live := row()
	for _, want := range []string{"live", "reports-host", "4242", "v9.9.9", "reports", "build", "8", "3"} {
		if !strings.Contains(live, want) {
			t.Errorf("the new worker's row %q lacks %q", live, want)
		}
	}
	if strings.Contains(live, "stale") {
		t.Errorf("a worker that just registered reads stale: %q", live)
	}
	// Its last refresh was a minute ago, twice its StaleAfter.
	register(time.Now().Add(-time.Minute))
	if stale := row(); !strings.Contains(stale, "stale") {
		t.Errorf("a worker silent for a minute reads %q, want stale", stale)
	}
	var cls string
	b.run(chromedp.Evaluate(`document.evaluate('//table[contains(@class,"workers")]//tr[th[normalize-space()="reports-worker-7"]]', document, null, 9, null).singleNodeValue.className`, &cls),
		b.screenshot("console-workers-stale"))
	if cls != "stale" {
		t.Errorf("the stale worker's row has class %q", cls)
	}
}
