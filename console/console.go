// Package console is rdq's dead-letter queue console: a server-rendered web
// application where the people who triage failures see what is failing,
// why, and fix it (redrive, edit and redrive, purge, pause a queue), with
// every change written to the audit log under their name.
//
// New returns an http.Handler to mount under any path prefix of any Go
// program:
//
//	c, err := console.New(console.Config{
//		Store:     st, // *pgstore.Store or *sqlitestore.Store
//		Prefix:    "/ops/rdq",
//		Authorize: func(r *http.Request, a console.Action, queue string) error { … },
//		Actor:     func(r *http.Request) string { … },
//	})
//	mux.Handle("/ops/rdq/", c)
//
// The pages are plain HTML and work with JavaScript off; with it on, htmx
// (embedded, no CDN) refreshes them at an interval the user picks. Every
// response carries a strict Content-Security-Policy (no inline script or
// style), and mutations are POSTs behind http.CrossOriginProtection. The
// Authorize hook decides every read and every mutation on the server; the
// pages also use it to hide the controls a person may not use.
package console

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/dlq"
	"github.com/srjn45/rdq/internal/origin"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/tasks"
)

// Action is what a request wants to do; the Authorize hook receives it with
// the queue it concerns.
type Action string

// The actions the console asks the Authorize hook about.
const (
	// ActionRead covers every page: queues, dead tasks, groups, a task with
	// its payload, the audit log and bulk-action progress.
	ActionRead Action = "read"
	// ActionRedrive puts dead tasks back to work, one or in bulk.
	ActionRedrive Action = "redrive"
	// ActionEditPayload replaces a dead task's payload and redrives it.
	ActionEditPayload Action = "edit_payload"
	// ActionPurge deletes dead tasks for good, one or in bulk.
	ActionPurge Action = "purge"
	// ActionPause pauses and resumes a queue, and one handler of it (its
	// circuit breaker, on stores that pause handlers).
	ActionPause Action = "pause"
	// ActionRetryNow makes a waiting (pending or retrying) task due at
	// once, on stores that list live tasks.
	ActionRetryNow Action = "retry_now"
	// ActionCancel moves a waiting task into the dead-letter queue, on
	// stores that list live tasks.
	ActionCancel Action = "cancel"
)

// Actions lists every action, for authorization tables and tests.
var Actions = []Action{ActionRead, ActionRedrive, ActionEditPayload, ActionPurge, ActionPause, ActionRetryNow, ActionCancel}

// AllQueues is the queue the Authorize hook receives for a request that is
// not about one queue: a listing or bulk action without a queue filter, the
// audit log without a queue, the failure chart of every queue.
const AllQueues = ""

// Config configures a Console. Store, Authorize and Actor are required.
type Config struct {
	// Store is the backend: *pgstore.Store or *sqlitestore.Store, or any
	// dlq.Backend. When it also implements store.Pauser the overview
	// offers pause and resume; when it implements store.LiveTasks the
	// console lists live tasks and offers retry-now and cancel; when it
	// implements store.NotDueCounter, store.DeadHistogrammer or
	// store.DeadGroupKeyer, the overview splits the backlog into due and
	// not due, the pages draw failure charts, and the failure groups name
	// their queues and handlers; with store.WaitingCounter the overview
	// splits it into due, retrying, scheduled and held, and with
	// store.GroupOriginReader the groups are dated by when their failure
	// first happened.
	Store dlq.Backend
	// DLQ, if set, is the DLQ the console mutates through (sharing its
	// metrics and chunking); nil builds one over Store with the defaults.
	DLQ *dlq.DLQ
	// Prefix is the path the console is mounted under, such as "/ops/rdq";
	// empty mounts it at the root. Every URL the console emits starts with
	// it, and it strips it from requests itself: mount the console as
	// mux.Handle(Prefix+"/", c).
	Prefix string
	// Authorize is called before every read and every mutation, and to
	// decide which controls to show. queue is the queue concerned, or
	// AllQueues. A non-nil error refuses the request with 403 Forbidden
	// and its text is shown to the person.
	Authorize func(r *http.Request, action Action, queue string) error
	// Actor names the person behind r, for the audit log; it is called
	// only for requests Authorize allowed. An empty name refuses the
	// mutation.
	Actor func(r *http.Request) string
	// TrustedOrigins lists origins ("https://rdq.example.com") besides
	// the console's own from which changes are accepted: the public
	// origin when a TLS-terminating proxy serves the console over https
	// to a plain-http listener. Without it a change whose Origin has the
	// console's host but another scheme than the listener's is refused.
	TrustedOrigins []string
	// SignOutPath, if set, shows a "Sign out" button that POSTs there.
	SignOutPath string
	// Logger receives one record per mutation and per internal error;
	// nil discards them. Payloads are never logged.
	Logger *slog.Logger
	// Now is the clock of the charts and of relative times; nil means
	// time.Now. Tests set it.
	Now func() time.Time
	// ChartMaxAge is how old the overview's 24 h failure chart may be
	// before a view recounts it; 0 means DefaultChartMaxAge. The chart is
	// counted by one query at most once per ChartMaxAge, whatever the
	// number of viewers; a chart up to four times as old is shown while it
	// is recounted in the background, an older one is recounted while the
	// view waits. The page says when the chart was counted. A negative
	// value recounts it for every view.
	ChartMaxAge time.Duration
}

// Console is the DLQ console, an http.Handler. Close it when done: it
// stops bulk actions still running.
type Console struct {
	st        dlq.Backend
	dlq       *dlq.DLQ
	prefix    string
	authorize func(r *http.Request, action Action, queue string) error
	actor     func(r *http.Request) string
	signOut   string
	// trustedOrigins are Config.TrustedOrigins.
	trustedOrigins []string
	log            *slog.Logger
	now            func() time.Time
	pages          map[string]*template.Template
	handler        http.Handler
	jobs           *jobs
	// tasks is the live-task API; nil when the store cannot list live
	// tasks.
	tasks *tasks.Tasks
	// chart serves the overview's failure chart; nil when the store
	// cannot count dead tasks per hour.
	chart *chartCache[[]int64]
	// registry is the store's worker registry; nil when it keeps none.
	registry store.WorkerRegistry
	// series counts attempts over time; nil when the store cannot.
	series store.SeriesReader
	// activityCharts serves the overview's activity charts (every queue's
	// series per minute and per hour); nil without series.
	activityCharts *chartCache[activitySeries]
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// New returns a console over cfg.Store. It fails with an error wrapping
// rdq.ErrInvalid when a required field is missing or the prefix is not a
// clean absolute path.
func New(cfg Config) (*Console, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("%w: console: Config.Store is required", rdq.ErrInvalid)
	}
	if cfg.Authorize == nil {
		return nil, fmt.Errorf("%w: console: Config.Authorize is required (return nil to allow everything, e.g. for a local user)", rdq.ErrInvalid)
	}
	if cfg.Actor == nil {
		return nil, fmt.Errorf("%w: console: Config.Actor is required: it names who made each change in the audit log", rdq.ErrInvalid)
	}
	prefix := strings.TrimSuffix(cfg.Prefix, "/")
	if prefix != "" && (!strings.HasPrefix(prefix, "/") || strings.ContainsAny(prefix, "?#\"'<> ") || strings.Contains(prefix, "//")) {
		return nil, fmt.Errorf("%w: console: prefix %q: use an absolute path such as /ops/rdq", rdq.ErrInvalid, cfg.Prefix)
	}
	d := cfg.DLQ
	if d == nil {
		var err error
		if d, err = dlq.New(cfg.Store, dlq.Config{Logger: cfg.Logger}); err != nil {
			return nil, err
		}
	}
	c := &Console{
		st: cfg.Store, dlq: d, prefix: prefix, authorize: cfg.Authorize, actor: cfg.Actor,
		signOut: cfg.SignOutPath, trustedOrigins: cfg.TrustedOrigins,
		log:  cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		now:  cfg.Now,
		jobs: newJobs(),
	}
	if c.now == nil {
		c.now = time.Now
	}
	if h, ok := store.DeadHistogrammerOf(cfg.Store); ok {
		c.chart = newChartCache(cmp.Or(cfg.ChartMaxAge, DefaultChartMaxAge), c.now, chartStartAt,
			func(ctx context.Context, start time.Time) ([]int64, error) {
				hist, err := h.DeadHistogram(ctx, start, time.Hour, chartHours, nil)
				return hist[""], err
			},
			func(err error) { c.log.Error("console: the overview's failure chart", "error", err) })
	}
	if _, ok := store.LiveTasksOf(cfg.Store); ok {
		t, err := tasks.New(cfg.Store, tasks.Config{Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		c.tasks = t
	}
	if reg, ok := store.RegistryOf(cfg.Store); ok {
		c.registry = reg
	}
	if sr, ok := store.SeriesReaderOf(cfg.Store); ok {
		c.series = sr
		c.activityCharts = newChartCache(cmp.Or(cfg.ChartMaxAge, DefaultChartMaxAge), c.now,
			func(now time.Time) time.Time { return now.Truncate(time.Minute) },
			func(ctx context.Context, _ time.Time) (activitySeries, error) { return readActivity(ctx, sr) },
			func(err error) { c.log.Error("console: the overview's activity charts", "error", err) })
	}
	if err := c.parseTemplates(); err != nil {
		return nil, err
	}
	var err error
	if c.handler, err = c.routes(); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

// Close cancels the bulk actions still running and waits for them to
// stop. Each stops at a chunk boundary: what it did is committed and
// audited.
func (c *Console) Close() error {
	c.jobs.closeAll()
	if c.chart != nil {
		c.chart.close()
	}
	if c.activityCharts != nil {
		c.activityCharts.close()
	}
	return nil
}

// ServeHTTP serves the console. Requests outside Prefix get 404.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.handler.ServeHTTP(w, r)
}

// contentSecurityPolicy allows the console's own script and stylesheet
// only: no inline script or style, no plug-ins, no framing, forms posting
// only to the console's origin.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func (c *Console) routes() (http.Handler, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", c.overview)
	mux.HandleFunc("POST /queues/pause", c.pause)
	mux.HandleFunc("POST /queues/resume", c.pause)
	mux.HandleFunc("POST /handlers/pause", c.handlerPause)
	mux.HandleFunc("POST /handlers/resume", c.handlerPause)
	mux.HandleFunc("GET /dead", c.deadList)
	mux.HandleFunc("GET /groups", c.groups)
	mux.HandleFunc("GET /tasks/{id}", c.task)
	mux.HandleFunc("GET /find", c.find)
	mux.HandleFunc("POST /tasks/{id}/redrive", c.taskRedrive)
	mux.HandleFunc("POST /tasks/{id}/edit", c.taskEdit)
	mux.HandleFunc("POST /tasks/{id}/edit/confirm", c.taskEditConfirm)
	mux.HandleFunc("POST /tasks/{id}/purge", c.taskPurge)
	mux.HandleFunc("GET /bulk", c.bulkForm)
	mux.HandleFunc("POST /bulk/dry-run", c.bulkDryRun)
	mux.HandleFunc("POST /bulk/run", c.bulkRun)
	mux.HandleFunc("GET /jobs/{id}", c.job)
	mux.HandleFunc("GET /audit", c.audit)
	if c.registry != nil {
		mux.HandleFunc("GET /workers", c.workers)
	}
	if c.series != nil {
		mux.HandleFunc("GET /activity", c.activity)
	}
	if c.tasks != nil {
		mux.HandleFunc("GET /live", c.live)
		mux.HandleFunc("POST /tasks/{id}/retry-now", c.liveChange)
		mux.HandleFunc("POST /tasks/{id}/cancel", c.liveChange)
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err) // the embedded tree always has it
	}
	files := http.FileServerFS(static)
	mux.Handle("GET /static/", http.StripPrefix("/static", staticHeaders(files)))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, http.StatusNotFound, errors.New("there is no such page in the console"))
	})

	var h http.Handler = c.parseForms(mux)
	if c.prefix != "" {
		h = http.StripPrefix(c.prefix, h)
	}
	h, err = origin.Protect(h, c.trustedOrigins, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, http.StatusForbidden, errors.New("cross-origin request refused: changes can only be made from the console's own pages, at the address it is served on"))
	}))
	if err != nil {
		return nil, fmt.Errorf("%w: console: %w", rdq.ErrInvalid, err)
	}
	return securityHeaders(h), nil
}

// maxFormBytes bounds a request body: an edited payload of
// rdq.MaxPayloadBytes, URL-encoded, and the other fields fit.
const maxFormBytes = 4*rdq.MaxPayloadBytes + 64<<10

// parseForms parses the body of every POST before its handler runs, so an
// oversized or malformed form is refused with a clear error instead of
// reading as empty fields.
func (c *Console) parseForms(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			if err := r.ParseForm(); err != nil {
				var tooBig *http.MaxBytesError
				if errors.As(err, &tooBig) {
					c.fail(w, r, http.StatusRequestEntityTooLarge, fmt.Errorf("the form is over %d bytes; payloads are limited to %d bytes", tooBig.Limit, rdq.MaxPayloadBytes))
					return
				}
				c.fail(w, r, http.StatusBadRequest, fmt.Errorf("the form could not be read: %v", err))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		}
		next.ServeHTTP(w, r)
	})
}

func staticHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		next.ServeHTTP(w, r)
	})
}

// errForbidden marks a refusal by the Authorize hook.
type errForbidden struct{ err error }

func (e errForbidden) Error() string { return "not allowed: " + e.err.Error() }
func (e errForbidden) Unwrap() error { return e.err }

// allow asks the hook; the error, when not nil, is an errForbidden.
func (c *Console) allow(r *http.Request, a Action, queue string) error {
	if err := c.authorize(r, a, queue); err != nil {
		return errForbidden{err}
	}
	return nil
}

// can reports whether the hook allows a, for showing controls.
func (c *Console) can(r *http.Request, a Action, queue string) bool {
	return c.authorize(r, a, queue) == nil
}

// actorOf names the person behind r for the audit log.
func (c *Console) actorOf(r *http.Request) (string, error) {
	a := strings.TrimSpace(c.actor(r))
	if a == "" {
		return "", errForbidden{errors.New("the console cannot tell who you are, and every change is attributed to someone")}
	}
	return a, nil
}

// statusOf maps an error to the response status.
func statusOf(err error) int {
	var fb errForbidden
	switch {
	case errors.As(err, &fb):
		return http.StatusForbidden
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, store.ErrNotDead), errors.Is(err, store.ErrRedriveLimit), errors.Is(err, store.ErrNotPending):
		return http.StatusConflict
	case errors.Is(err, rdq.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
