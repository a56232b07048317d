package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/dlq"
	"github.com/srjn45/rdq/store"
)

// recentChanges is how many audit entries the overview shows.
const recentChanges = 8

// chartHours is the span of the failure charts.
const chartHours = 24

// chartStartAt is the start of the hourly chart ending with the hour of
// now.
func chartStartAt(now time.Time) time.Time {
	return now.UTC().Truncate(time.Hour).Add(-(chartHours - 1) * time.Hour)
}

// --- Overview ---------------------------------------------------------------

type queueRow struct {
	store.QueueStats
	Due, NotDue int64
	KnowsNotDue bool
	// Waiting splits the tasks not due and counts the held ones
	// (KnowsWaiting: stores with a store.WaitingCounter).
	Waiting      store.WaitingCounts
	KnowsWaiting bool
	Paused       bool
	// NoLiveWorker: tasks wait and no live registered worker runs the
	// queue (stores with a worker registry).
	NoLiveWorker bool
	// Failures counts the queue's failed attempts per minute over the
	// last hour (stores with a series).
	Failures []int64
	// Held are the queue's handlers paused (by their circuit breaker or
	// by hand): their tasks wait although the queue runs.
	Held []string
}

type overviewData struct {
	Queues   []queueRow
	CanPause bool // the store can pause queues
	// Waiting: the store splits waiting tasks (store.WaitingCounter);
	// otherwise the rows count the tasks not due (KnowsNotDue).
	Waiting    bool
	Chart      []int64
	ChartStart time.Time
	ChartAt    time.Time // when the chart was counted
	ChartEvery time.Duration
	HasChart   bool
	// Minutes and Hours are the activity charts, when the store counts
	// attempts over time (HasSeries).
	Minutes, Hours seriesView
	HasSeries      bool
	SeriesAt       time.Time // when they were read
	Recent         []auditRow
	// Breakers are the paused handlers, when the store pauses handlers.
	Breakers    []store.HandlerPause
	HasBreakers bool
	// Unserved are the waiting tasks no live worker can run, when the
	// store keeps a worker registry (HasRegistry).
	Unserved    []store.UnservedHandler
	HasRegistry bool
	Done        string
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	stats, err := c.dlq.Stats(ctx, time.Hour)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	byQueue := map[string]*queueRow{}
	for _, s := range stats {
		byQueue[s.Queue] = &queueRow{QueueStats: s}
	}
	var d overviewData
	if p, ok := store.PauserOf(c.st); ok {
		d.CanPause = true
		paused, err := p.PausedQueues(ctx)
		if err != nil {
			c.failErr(w, r, err)
			return
		}
		for _, q := range paused {
			if byQueue[q] == nil {
				byQueue[q] = &queueRow{QueueStats: store.QueueStats{Queue: q}}
			}
			byQueue[q].Paused = true
		}
	}
	if wc, ok := store.WaitingCounterOf(c.st); ok {
		d.Waiting = true
		counts, err := wc.WaitingCounts(ctx, nil)
		if err != nil {
			c.failErr(w, r, err)
			return
		}
		for q, n := range counts {
			if byQueue[q] == nil {
				byQueue[q] = &queueRow{QueueStats: store.QueueStats{Queue: q}}
			}
			byQueue[q].Waiting = n
		}
		for _, row := range byQueue {
			row.KnowsWaiting = true
		}
	} else if nd, ok := store.NotDueCounterOf(c.st); ok {
		counts, err := nd.NotDueCounts(ctx, nil)
		if err != nil {
			c.failErr(w, r, err)
			return
		}
		for _, row := range byQueue {
			row.KnowsNotDue = true
			row.NotDue = counts[row.Queue]
		}
	}
	if c.activityCharts != nil {
		ch, err := c.activityCharts.get(ctx)
		if err != nil {
			c.failErr(w, r, err)
			return
		}
		d.HasSeries, d.SeriesAt, d.ChartEvery = true, ch.at, max(c.activityCharts.maxAge, 0)
		var lines []activityLine
		d.Minutes, lines = c.seriesView(r, ch.val.minutes)
		d.Hours, _ = c.seriesView(r, ch.val.hours)
		for _, l := range lines {
			if row := byQueue[l.Queue]; row != nil {
				if row.Failures == nil {
					row.Failures = make([]int64, len(l.Failures))
				}
				for i, n := range l.Failures {
					row.Failures[i] += n
				}
			}
		}
	}
	all := c.can(r, ActionRead, AllQueues)
	if d.Breakers, d.HasBreakers, err = c.pausedHandlers(r, all); err != nil {
		c.failErr(w, r, err)
		return
	}
	for _, b := range d.Breakers {
		if row := byQueue[b.Queue]; row != nil {
			row.Held = append(row.Held, b.Handler)
		}
	}
	for _, q := range slices.Sorted(maps.Keys(byQueue)) {
		row := byQueue[q]
		if !all && !c.can(r, ActionRead, q) {
			continue
		}
		if row.KnowsWaiting {
			row.Due = max(row.Pending-row.Waiting.Retrying-row.Waiting.Scheduled-row.Waiting.Held, 0)
		} else {
			row.Due = max(row.Pending-row.NotDue, 0)
		}
		d.Queues = append(d.Queues, *row)
	}
	if !all && len(d.Queues) == 0 {
		if err := c.allow(r, ActionRead, AllQueues); err != nil {
			c.failErr(w, r, err)
			return
		}
	}
	if c.chart != nil && all {
		ch, err := c.chart.get(ctx)
		if err != nil {
			c.failErr(w, r, err)
			return
		}
		d.Chart, d.ChartStart, d.ChartAt, d.ChartEvery, d.HasChart = ch.val, ch.start, ch.at, max(c.chart.maxAge, 0), true
	}
	if all {
		entries, err := c.dlq.Audit(ctx, dlq.AuditQuery{Limit: recentChanges})
		if err != nil {
			c.failErr(w, r, err)
			return
		}
		for _, e := range entries {
			d.Recent = append(d.Recent, newAuditRow(e))
		}
	}
	if err := c.overviewWorkers(r, &d); err != nil {
		c.failErr(w, r, err)
		return
	}
	d.Done = doneMessage(r)
	c.render(w, r, http.StatusOK, "overview", &view{Title: "Queues", Nav: "overview", Live: true, Data: d})
}

// doneMessages are the confirmations a redirect after a change may ask for
// (?done=...); anything else shows nothing.
var doneMessages = map[string]string{
	"paused":          "Queue paused.",
	"resumed":         "Queue resumed.",
	"redriven":        "Task redriven: it is pending again, in a new life.",
	"edited":          "Payload replaced and task redriven.",
	"purged":          "Task purged.",
	"retried":         "Task made due now.",
	"handler_paused":  "Handler paused: its tasks wait until it is resumed.",
	"handler_resumed": "Handler resumed.",
	"cancelled":       "Task cancelled: it is in the dead-letter queue, where it can be redriven.",
}

func doneMessage(r *http.Request) string { return doneMessages[r.URL.Query().Get("done")] }

// pauseForm checks that the principal may pause queue and reads the posted
// reason, validated as every audited reason is (dlq.ValidateReason). It
// returns the actor and the reason; on failure it has answered the request.
func (c *Console) pauseForm(w http.ResponseWriter, r *http.Request, queue string) (actor, reason string, ok bool) {
	if err := c.allow(r, ActionPause, queue); err != nil {
		c.failErr(w, r, err)
		return "", "", false
	}
	actor, err := c.actorOf(r)
	if err != nil {
		c.failErr(w, r, err)
		return "", "", false
	}
	reason = strings.TrimSpace(r.PostFormValue("reason"))
	if err := dlq.ValidateReason(reason); err != nil {
		c.failErr(w, r, fmt.Errorf("pausing or resuming: %w", err))
		return "", "", false
	}
	return actor, reason, true
}

func (c *Console) pause(w http.ResponseWriter, r *http.Request) {
	pause := strings.HasSuffix(r.URL.Path, "/pause")
	queue := strings.TrimSpace(r.PostFormValue("queue"))
	if err := rdq.ValidateName("queue", queue); err != nil {
		c.failErr(w, r, err)
		return
	}
	actor, reason, ok := c.pauseForm(w, r, queue)
	if !ok {
		return
	}
	p, ok := store.PauserOf(c.st)
	if !ok {
		c.fail(w, r, http.StatusNotImplemented, errors.New("this store cannot pause queues"))
		return
	}
	params := store.PauseParams{Queue: queue, Actor: actor, Reason: reason}
	var err error
	done := "paused"
	if pause {
		err = p.PauseQueue(r.Context(), params)
	} else {
		done = "resumed"
		err = p.ResumeQueue(r.Context(), params)
	}
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	c.log.InfoContext(r.Context(), "console: queue "+done, "queue", queue, "actor", actor)
	http.Redirect(w, r, c.url("/?done="+done), http.StatusSeeOther)
}

// --- Dead tasks -------------------------------------------------------------

type deadData struct {
	Filter     dlq.Filter
	Values     url.Values
	FilterText string
	Tasks      []*rdq.Task
	Next       string
	Count      int64
	Counted    bool
	Size       int
	Done       string
}

func (c *Console) deadList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f, err := parseFilter(c.now(), q)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	f.Handler = c.canonicalHandler(r, f.Handler)
	if err := c.allow(r, ActionRead, f.Queue); err != nil {
		c.failErr(w, r, err)
		return
	}
	size := dlq.DefaultPageSize
	if s := q.Get("size"); s != "" {
		if size, err = strconv.Atoi(s); err != nil || size < 1 || size > 500 {
			c.failErr(w, r, fmt.Errorf("%w: page size %q: use 1 to 500", rdq.ErrInvalid, clip(s)))
			return
		}
	}
	page, err := c.dlq.List(r.Context(), f, dlq.ListOptions{PageSize: size, PageToken: q.Get("page")})
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	d := deadData{Filter: f, Values: filterValues(f), FilterText: f.String(), Tasks: page.Tasks, Size: size, Done: doneMessage(r)}
	if page.NextPageToken != "" {
		v := filterValues(f)
		v.Set("page", page.NextPageToken)
		if size != dlq.DefaultPageSize {
			v.Set("size", strconv.Itoa(size))
		}
		d.Next = withQuery(c.url("/dead"), v)
	}
	if countable(f) {
		if d.Count, err = c.dlq.Count(r.Context(), f); err != nil {
			c.failErr(w, r, err)
			return
		}
		d.Counted = true
	}
	c.render(w, r, http.StatusOK, "dead", &view{Title: "Dead tasks", Nav: "dead", Live: true, Data: d})
}

// --- Groups -----------------------------------------------------------------

// maxGroupsShown is the groups of one page; later pages show the rest.
// maxGroupCharts is how many of the biggest groups of a page get a chart:
// each chart reads the group's tasks of up to the last day.
const (
	maxGroupsShown = 100
	maxGroupCharts = 25
)

type groupRow struct {
	store.Group
	// Origin is when the group's failure first happened, if the store
	// tells (store.GroupOriginReader) and it is before FirstSeen (after a
	// redrive, FirstSeen is when the redriven tasks died again).
	Origin    time.Time
	Keys      [][2]string
	Chart     []int64
	ListURL   string
	Values    url.Values
	MoreKeys  int
	ShowChart bool
}

type groupsData struct {
	Filter     dlq.Filter
	Values     url.Values
	FilterText string
	Groups     []groupRow
	Hidden     int
	Total      int64
	// Offset is the rank of the page's first group (from 0); Count is how
	// many groups match; Prev and Next page through them.
	Offset, Count int
	Prev, Next    string
	// ChartSpan is what the charts cover (see groupChartWindow).
	ChartSpan time.Duration
	HasKeys   bool
	// ChartsOff is set when the filter is narrower than the charts.
	ChartsOff bool
}

// groupChartBuckets bounds the bars of a group's chart.
const groupChartBuckets = 48

// groupChartWindow is the span of the groups' charts, at the scale of the
// incident: from the earliest of the groups' last deaths (so every group
// shows its latest deaths) to the end of the current minute, at least an
// hour and at most a day, in up to groupChartBuckets bars of whole
// minutes. It returns the start, the bar width and the number of bars.
func groupChartWindow(now time.Time, gs []store.Group) (time.Time, time.Duration, int) {
	span := time.Hour
	for _, g := range gs {
		span = max(span, now.Sub(g.LastSeen))
	}
	span = min(span, chartHours*time.Hour)
	width := (span + groupChartBuckets*time.Minute - 1) / (groupChartBuckets * time.Minute) * time.Minute
	buckets := int((span + width - 1) / width)
	end := now.Truncate(time.Minute).Add(time.Minute)
	return end.Add(-width * time.Duration(buckets)), width, buckets
}

func (c *Console) groups(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	f, err := parseFilter(c.now(), r.URL.Query())
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	f.Handler = c.canonicalHandler(r, f.Handler)
	if err := c.allow(r, ActionRead, f.Queue); err != nil {
		c.failErr(w, r, err)
		return
	}
	gs, err := c.dlq.Groups(ctx, f)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	d := groupsData{Filter: f, Values: filterValues(f), FilterText: f.String(), Count: len(gs)}
	for _, g := range gs {
		d.Total += g.Count
	}
	if o := r.URL.Query().Get("offset"); o != "" {
		if d.Offset, err = strconv.Atoi(o); err != nil || d.Offset < 0 || d.Offset%maxGroupsShown != 0 {
			c.failErr(w, r, fmt.Errorf("%w: offset %q: use a multiple of %d, as the page links do", rdq.ErrInvalid, clip(o), maxGroupsShown))
			return
		}
	}
	page := func(offset int) string {
		v := filterValues(f)
		if offset > 0 {
			v.Set("offset", strconv.Itoa(offset))
		}
		return withQuery(c.url("/groups"), v)
	}
	if d.Offset > 0 {
		d.Prev = page(d.Offset - maxGroupsShown)
	}
	gs = gs[min(d.Offset, len(gs)):]
	if len(gs) > maxGroupsShown {
		d.Hidden = len(gs) - maxGroupsShown
		d.Next = page(d.Offset + maxGroupsShown)
		gs = gs[:maxGroupsShown]
	}
	fps := make([]string, len(gs))
	for i, g := range gs {
		fps[i] = g.Fingerprint
	}
	var keys map[string][][2]string
	if k, ok := store.DeadGroupKeyerOf(c.st); ok && len(fps) > 0 {
		if keys, err = k.DeadGroupKeys(ctx, fps); err != nil {
			c.failErr(w, r, err)
			return
		}
		d.HasKeys = true
	}
	// A group's chart counts its dead tasks of every queue and handler:
	// it is drawn only when the page selects no narrower set, so that it
	// never counts tasks the page (and perhaps the principal) may not see.
	var hist map[string][]int64
	d.ChartsOff = f.Queue != "" || f.Handler != "" || f.MessageContains != "" || f.LifeMin != 0 || f.LifeBelow != 0 || len(f.IDs) > 0
	if h, ok := store.DeadHistogrammerOf(c.st); ok && len(fps) > 0 && !d.ChartsOff {
		start, width, buckets := groupChartWindow(c.now(), gs[:min(len(gs), maxGroupCharts)])
		d.ChartSpan = width * time.Duration(buckets)
		if hist, err = h.DeadHistogram(ctx, start, width, buckets, fps[:min(len(fps), maxGroupCharts)]); err != nil {
			c.failErr(w, r, err)
			return
		}
	}
	// A group's origin is read from its tasks of every queue: like the
	// charts, only when the page selects no narrower set.
	var origins map[string]time.Time
	if o, ok := store.GroupOriginReaderOf(c.st); ok && len(fps) > 0 && !d.ChartsOff {
		if origins, err = o.GroupOrigins(ctx, fps); err != nil {
			c.failErr(w, r, err)
			return
		}
	}
	for _, g := range gs {
		gf := f
		gf.Fingerprint = g.Fingerprint
		row := groupRow{Group: g, Values: filterValues(gf), ListURL: withQuery(c.url("/dead"), filterValues(gf))}
		for _, k := range keys[g.Fingerprint] {
			if (f.Queue == "" || k[0] == f.Queue) && (f.Handler == "" || k[1] == f.Handler) {
				row.Keys = append(row.Keys, k)
			}
		}
		if len(row.Keys) > 6 {
			row.MoreKeys = len(row.Keys) - 6
			row.Keys = row.Keys[:6]
		}
		row.Chart, row.ShowChart = hist[g.Fingerprint]
		if at, ok := origins[g.Fingerprint]; ok && at.Before(g.FirstSeen) {
			row.Origin = at
		}
		d.Groups = append(d.Groups, row)
	}
	c.render(w, r, http.StatusOK, "groups", &view{Title: "Failure groups", Nav: "groups", Live: true, Data: d})
}

// --- Task -------------------------------------------------------------------

type life struct {
	Life     int
	Attempts []attemptRow
}

type attemptRow struct {
	rdq.Attempt
	Duration time.Duration
	Failed   bool
}

type auditRow struct {
	store.AuditEntry
	ByFilter bool
	// Queue names the queues the entry touched: its Queues, or the queue
	// its filter names in an entry written before stores recorded them.
	Queue      string
	FilterText string
	Details    [][2]string
}

type taskData struct {
	Task    *rdq.Task
	Payload payloadView
	Headers [][2]string
	Lives   []life
	Audit   []auditRow
	Done    string
	// Edit form state, on the edit page.
	NewText string
	Diff    []diffLine
	Changed bool
	EditErr string
}

// loadTask reads the task named in the path and checks that a is allowed
// on its queue. A task of a queue the principal may not read is answered
// as a missing one, so its existence and queue stay unknown.
func (c *Console) loadTask(r *http.Request, a Action) (dlq.Detail, error) {
	id, err := rdq.ParseID(r.PathValue("id"))
	if err != nil {
		return dlq.Detail{}, fmt.Errorf("%w: %q is not a task id", store.ErrNotFound, clip(r.PathValue("id")))
	}
	det, err := c.dlq.Show(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && !c.can(r, ActionRead, det.Task.Queue)) {
		return dlq.Detail{}, fmt.Errorf("%w: there is no task %s, or not in a queue you may read", store.ErrNotFound, id)
	}
	if err != nil {
		return dlq.Detail{}, err
	}
	if err := c.allow(r, a, det.Task.Queue); err != nil {
		return dlq.Detail{}, err
	}
	return det, nil
}

func (c *Console) task(w http.ResponseWriter, r *http.Request) {
	det, err := c.loadTask(r, ActionRead)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	d, err := c.taskData(r.Context(), r, det)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	d.Done = doneMessage(r)
	// A task that is not dead is a live one: the nav marks its section.
	nav := "dead"
	if det.Task.Status != rdq.StatusDead && c.tasks != nil {
		nav = "live"
	}
	c.render(w, r, http.StatusOK, "task", &view{Title: "Task " + det.Task.ID.String(), Nav: nav, Data: d})
}

func (c *Console) taskData(ctx context.Context, r *http.Request, det dlq.Detail) (taskData, error) {
	t := det.Task
	d := taskData{Task: t, Payload: viewPayload(t.Payload, t.ContentType)}
	for _, k := range slices.Sorted(maps.Keys(t.Headers)) {
		d.Headers = append(d.Headers, [2]string{k, t.Headers[k]})
	}
	for _, a := range det.Attempts {
		if len(d.Lives) == 0 || d.Lives[len(d.Lives)-1].Life != a.Life {
			d.Lives = append(d.Lives, life{Life: a.Life})
		}
		l := &d.Lives[len(d.Lives)-1]
		l.Attempts = append(l.Attempts, attemptRow{Attempt: a, Duration: a.FinishedAt.Sub(a.StartedAt), Failed: a.Outcome != rdq.OutcomeSuccess})
	}
	audit, err := c.taskAudit(ctx, r, t)
	if err != nil {
		return d, err
	}
	d.Audit = audit
	return d, nil
}

// maxTaskAuditScan bounds the audit entries read to find those touching a
// task (every entry since the task was created, newest first).
const maxTaskAuditScan = 1000

// taskAudit returns the audit entries that name t by ID, and the bulk
// entries whose filter selects it, among those r's principal may read in
// full: entries of t alone, of one queue it may read, or, with read on
// every queue, any. (An entry over several queues would show their counts
// and reasons.)
func (c *Console) taskAudit(ctx context.Context, r *http.Request, t *rdq.Task) ([]auditRow, error) {
	all := c.can(r, ActionRead, AllQueues)
	entries, err := c.dlq.Audit(ctx, dlq.AuditQuery{Since: t.CreatedAt.Add(-time.Second), Limit: maxTaskAuditScan})
	if err != nil {
		return nil, err
	}
	var out []auditRow
	for _, e := range entries {
		switch e.Action {
		case dlq.ActionRedrive, dlq.ActionEditPayload, dlq.ActionPurge, "retry_now", "cancel":
		default:
			continue
		}
		row := newAuditRow(e)
		switch {
		case slices.Contains(e.IDs, t.ID):
		case e.Filter != "" && filterSelects(e.Filter, t):
			row.ByFilter = true
		default:
			continue
		}
		alone := len(e.IDs) == 1 && e.IDs[0] == t.ID && (row.Queue == "" || row.Queue == t.Queue)
		if !all && !alone && (row.Queue == "" || !c.can(r, ActionRead, row.Queue)) {
			continue
		}
		out = append(out, row)
	}
	return out, nil
}

// auditFilter is the audit log's JSON form of a filter
// (store.DeadFilter.MarshalJSON).
type auditFilter struct {
	IDs             []rdq.ID `json:"ids"`
	Queue           string   `json:"queue"`
	Handler         string   `json:"handler"`
	ErrorType       string   `json:"error_type"`
	Fingerprint     string   `json:"fingerprint"`
	MessageContains string   `json:"message_contains"`
}

// filterSelects reports whether a bulk entry's filter selects t by its
// identity and last error (dead-time and life bounds are not checked: a
// redrive moves the dead time and the life).
func filterSelects(filterJSON string, t *rdq.Task) bool {
	var f auditFilter
	if err := json.Unmarshal([]byte(filterJSON), &f); err != nil {
		return false
	}
	switch {
	case len(f.IDs) > 0 && !slices.Contains(f.IDs, t.ID),
		f.Queue != "" && f.Queue != t.Queue,
		f.Handler != "" && f.Handler != t.Handler,
		f.ErrorType != "" && f.ErrorType != t.LastError.Type,
		f.Fingerprint != "" && !strings.EqualFold(f.Fingerprint, t.LastError.Fingerprint),
		f.MessageContains != "" && !strings.Contains(strings.ToLower(t.LastError.Message), strings.ToLower(f.MessageContains)):
		return false
	}
	return true
}

func newAuditRow(e store.AuditEntry) auditRow {
	row := auditRow{AuditEntry: e, FilterText: e.Filter}
	var f auditFilter
	if len(e.Queues) > 0 {
		row.Queue = strings.Join(e.Queues, ", ")
	} else if e.Filter != "" && json.Unmarshal([]byte(e.Filter), &f) == nil {
		row.Queue = f.Queue
	}
	for _, k := range slices.Sorted(maps.Keys(e.Details)) {
		row.Details = append(row.Details, [2]string{k, e.Details[k]})
	}
	return row
}

func (c *Console) taskRedrive(w http.ResponseWriter, r *http.Request) {
	det, err := c.loadTask(r, ActionRedrive)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	actor, err := c.actorOf(r)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	opts := dlq.RedriveOptions{Actor: actor, Reason: strings.TrimSpace(r.PostFormValue("reason"))}
	if err := c.dlq.RedriveTask(r.Context(), det.Task.ID, opts); err != nil {
		c.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, c.url("/tasks/"+det.Task.ID.String()+"?done=redriven"), http.StatusSeeOther)
}

// checkPayload validates an edited payload: its size, and JSON syntax
// when the task's content type says JSON.
func checkPayload(text, contentType string) error {
	if len(text) > rdq.MaxPayloadBytes {
		return fmt.Errorf("%w: the payload is %d bytes; the limit is %d", rdq.ErrInvalid, len(text), rdq.MaxPayloadBytes)
	}
	if isJSONType(contentType) {
		var v any
		if err := json.Unmarshal([]byte(text), &v); err != nil {
			return fmt.Errorf("%w: the content type is %s but the payload is not valid JSON: %v", rdq.ErrInvalid, contentType, err)
		}
	}
	return nil
}

// normalizeNewlines turns the CRLF a browser sends from a textarea into LF.
func normalizeNewlines(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }

func (c *Console) taskEdit(w http.ResponseWriter, r *http.Request) {
	det, err := c.loadTask(r, ActionEditPayload)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	if det.Task.Status != rdq.StatusDead {
		c.failErr(w, r, fmt.Errorf("%w (it is %s): only a dead task's payload can be edited", store.ErrNotDead, det.Task.Status))
		return
	}
	d, err := c.taskData(r.Context(), r, det)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	if !d.Payload.Editable {
		c.failErr(w, r, fmt.Errorf("%w: the payload is binary and cannot be edited here; use 'rdq dlq redrive ID --payload-file FILE'", rdq.ErrInvalid))
		return
	}
	d.NewText = normalizeNewlines(r.PostFormValue("payload"))
	status := http.StatusOK
	if err := checkPayload(d.NewText, det.Task.ContentType); err != nil {
		d.EditErr, status = err.Error(), http.StatusBadRequest
	}
	d.Diff = lineDiff(d.Payload.Text, d.NewText)
	d.Changed = d.NewText != d.Payload.Text
	c.render(w, r, status, "edit", &view{Title: "Edit payload", Nav: "dead", Data: d})
}

func (c *Console) taskEditConfirm(w http.ResponseWriter, r *http.Request) {
	det, err := c.loadTask(r, ActionEditPayload)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	actor, err := c.actorOf(r)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	text := normalizeNewlines(r.PostFormValue("payload"))
	if err := checkPayload(text, det.Task.ContentType); err != nil {
		c.failErr(w, r, err)
		return
	}
	opts := dlq.RedriveOptions{Actor: actor, Reason: strings.TrimSpace(r.PostFormValue("reason"))}
	if err := c.dlq.EditAndRedrive(r.Context(), det.Task.ID, []byte(text), opts); err != nil {
		c.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, c.url("/tasks/"+det.Task.ID.String()+"?done=edited"), http.StatusSeeOther)
}

func (c *Console) taskPurge(w http.ResponseWriter, r *http.Request) {
	det, err := c.loadTask(r, ActionPurge)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	actor, err := c.actorOf(r)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	if det.Task.Status != rdq.StatusDead {
		c.failErr(w, r, fmt.Errorf("%w (it is %s): only dead tasks can be purged", store.ErrNotDead, det.Task.Status))
		return
	}
	res, err := c.dlq.Purge(r.Context(), dlq.Filter{IDs: []rdq.ID{det.Task.ID}},
		dlq.PurgeOptions{Actor: actor, Reason: strings.TrimSpace(r.PostFormValue("reason"))})
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	if res.Purged == 0 {
		c.failErr(w, r, fmt.Errorf("%w: it left the dead-letter queue meanwhile", store.ErrNotDead))
		return
	}
	http.Redirect(w, r, c.url("/dead?done=purged"), http.StatusSeeOther)
}

// --- Bulk actions -----------------------------------------------------------

// bulkOptions are a bulk action's form fields besides the filter.
type bulkOptions struct {
	Op        string // "redrive" or "purge"
	All       bool
	Max       int64
	Delay     time.Duration
	Spread    time.Duration
	MaxLife   int
	HasLife   bool
	Reason    string
	Confirmed int64
}

func (o bulkOptions) action() Action {
	if o.Op == "purge" {
		return ActionPurge
	}
	return ActionRedrive
}

// values renders o as form values (without the reason).
func (o bulkOptions) values() url.Values {
	v := url.Values{"op": {o.Op}}
	if o.All {
		v.Set("all", "1")
	}
	if o.Max > 0 {
		v.Set("max", strconv.FormatInt(o.Max, 10))
	}
	if o.Delay > 0 {
		v.Set("delay", o.Delay.String())
	}
	if o.Spread > 0 {
		v.Set("spread", o.Spread.String())
	}
	if o.HasLife {
		v.Set("max_life", strconv.Itoa(o.MaxLife))
	}
	return v
}

func parseBulk(now time.Time, v url.Values) (dlq.Filter, bulkOptions, error) {
	f, err := parseFilter(now, v)
	if err != nil {
		return f, bulkOptions{}, err
	}
	o := bulkOptions{Op: v.Get("op"), All: v.Get("all") == "1", Reason: strings.TrimSpace(v.Get("reason"))}
	if o.Op != "redrive" && o.Op != "purge" {
		return f, o, fmt.Errorf("%w: bulk action %q: use redrive or purge", rdq.ErrInvalid, clip(o.Op))
	}
	if v.Get("selected") == "1" && len(f.IDs) == 0 {
		return f, o, fmt.Errorf("%w: no task is selected: tick the tasks to %s, or use %q", rdq.ErrInvalid, o.Op, o.Op+" all matching")
	}
	if s := strings.TrimSpace(v.Get("max")); s != "" {
		if o.Max, err = strconv.ParseInt(s, 10, 64); err != nil || o.Max < 0 {
			return f, o, fmt.Errorf("%w: max %q: use a whole number, or leave it empty for no limit", rdq.ErrInvalid, clip(s))
		}
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{"delay", &o.Delay}, {"spread", &o.Spread}} {
		if s := strings.TrimSpace(v.Get(d.name)); s != "" {
			if *d.dst, err = time.ParseDuration(s); err != nil || *d.dst < 0 {
				return f, o, fmt.Errorf("%w: %s %q: use a duration such as 30s, 10m or 2h", rdq.ErrInvalid, d.name, clip(s))
			}
		}
	}
	if s := strings.TrimSpace(v.Get("max_life")); s != "" {
		if o.MaxLife, err = strconv.Atoi(s); err != nil || o.MaxLife < 0 {
			return f, o, fmt.Errorf("%w: max life %q: use a whole number (0 for no cap), or leave it empty for the default", rdq.ErrInvalid, clip(s))
		}
		o.HasLife = true
	}
	if s := strings.TrimSpace(v.Get("confirmed")); s != "" {
		if o.Confirmed, err = strconv.ParseInt(s, 10, 64); err != nil || o.Confirmed < 0 {
			return f, o, fmt.Errorf("%w: confirmed count %q is not a count", rdq.ErrInvalid, clip(s))
		}
	}
	if f.IsEmpty() && !o.All {
		return f, o, dlq.ErrAllRequired
	}
	return f, o, nil
}

// maxLife maps the form's max life to RedriveOptions.MaxLife: empty is the
// DLQ's default, 0 no cap.
func (o bulkOptions) maxLife() int {
	switch {
	case !o.HasLife:
		return 0
	case o.MaxLife == 0:
		return -1
	}
	return o.MaxLife
}

type bulkData struct {
	Stage      string // "form", "confirm"
	Filter     dlq.Filter
	FilterText string
	Values     url.Values // filter and options, for hidden fields
	ListURL    string     // the dead-task list of the same filter
	Opts       bulkOptions
	Redrive    dlq.RedriveResult
	Purge      dlq.PurgeResult
	Count      int64
	// What the selection is, on the confirmation: up to three of its
	// tasks, its queues and handlers, how many already died after a
	// redrive, and the open breakers of its handlers.
	Samples   []*rdq.Task
	Keys      [][2]string
	DiedAgain int64
	Breakers  []store.HandlerPause
}

// bulkSamples is how many tasks a bulk confirmation shows.
const bulkSamples = 3

// describeSelection fills in what d's selection is (see bulkData).
func (c *Console) describeSelection(r *http.Request, d *bulkData) error {
	ctx := r.Context()
	page, err := c.dlq.List(ctx, d.Filter, dlq.ListOptions{PageSize: bulkSamples})
	if err != nil {
		return err
	}
	d.Samples = page.Tasks
	keys := map[[2]string]bool{}
	for _, t := range d.Samples {
		keys[[2]string{t.Queue, t.Handler}] = true
	}
	if k, ok := store.DeadGroupKeyerOf(c.st); ok && d.Filter.Fingerprint != "" {
		gk, err := k.DeadGroupKeys(ctx, []string{d.Filter.Fingerprint})
		if err != nil {
			return err
		}
		for _, k := range gk[d.Filter.Fingerprint] {
			if (d.Filter.Queue == "" || k[0] == d.Filter.Queue) && (d.Filter.Handler == "" || k[1] == d.Filter.Handler) {
				keys[k] = true
			}
		}
	}
	d.Keys = slices.SortedFunc(maps.Keys(keys), func(a, b [2]string) int {
		return strings.Compare(a[0]+"\x00"+a[1], b[0]+"\x00"+b[1])
	})
	if d.Opts.Op == "redrive" {
		again := d.Filter
		again.LifeMin = max(again.LifeMin, 1)
		if d.DiedAgain, err = c.dlq.Count(ctx, again); err != nil {
			return err
		}
	}
	pauses, _, err := c.pausedHandlers(r, c.can(r, ActionRead, AllQueues))
	if err != nil {
		return err
	}
	for _, p := range pauses {
		if keys[[2]string{p.Queue, p.Handler}] {
			d.Breakers = append(d.Breakers, p)
		}
	}
	return nil
}

// MostDiedAgain reports that most of the selection already died after a
// redrive: redriving it again is likely to fail again.
func (d bulkData) MostDiedAgain() bool { return d.Count > 0 && 2*d.DiedAgain > d.Count }

func (c *Console) bulkForm(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("op") == "" {
		q.Set("op", "redrive")
	}
	f, o, err := parseBulk(c.now(), q)
	if errors.Is(err, dlq.ErrAllRequired) {
		err = nil // the form asks for it: a checkbox, when the filter is empty
	}
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	if err := c.allow(r, o.action(), f.Queue); err != nil {
		c.failErr(w, r, err)
		return
	}
	d := bulkData{Stage: "form", Filter: f, FilterText: f.String(), Values: filterValues(f), Opts: o}
	c.render(w, r, http.StatusOK, "bulk", &view{Title: "Bulk " + o.Op, Nav: "dead", Data: d})
}

// postedBulk reads a posted bulk form and checks the principal may do its
// action on its queue. On failure it has answered the request.
func (c *Console) postedBulk(w http.ResponseWriter, r *http.Request) (dlq.Filter, bulkOptions, bool) {
	if err := r.ParseForm(); err != nil {
		c.failErr(w, r, fmt.Errorf("%w: %v", rdq.ErrInvalid, err))
		return dlq.Filter{}, bulkOptions{}, false
	}
	f, o, err := parseBulk(c.now(), r.PostForm)
	if err != nil {
		c.failErr(w, r, err)
		return dlq.Filter{}, bulkOptions{}, false
	}
	if err := c.allow(r, o.action(), f.Queue); err != nil {
		c.failErr(w, r, err)
		return dlq.Filter{}, bulkOptions{}, false
	}
	return f, o, true
}

func (c *Console) bulkDryRun(w http.ResponseWriter, r *http.Request) {
	f, o, ok := c.postedBulk(w, r)
	if !ok {
		return
	}
	var err error
	d := bulkData{Stage: "confirm", Filter: f, FilterText: f.String(), Opts: o, ListURL: withQuery(c.url("/dead"), filterValues(f))}
	d.Values = filterValues(f)
	maps.Copy(d.Values, o.values())
	if o.Op == "redrive" {
		d.Redrive, err = c.dlq.Redrive(r.Context(), f, dlq.RedriveOptions{DryRun: true, All: o.All, Max: o.Max, MaxLife: o.maxLife()})
		d.Count = d.Redrive.Redriven
	} else {
		d.Purge, err = c.dlq.Purge(r.Context(), f, dlq.PurgeOptions{DryRun: true, All: o.All, Max: o.Max})
		d.Count = d.Purge.Purged
	}
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	if d.Count > 0 {
		if err := c.describeSelection(r, &d); err != nil {
			c.failErr(w, r, err)
			return
		}
	}
	d.Values.Set("confirmed", strconv.FormatInt(d.Count, 10))
	c.render(w, r, http.StatusOK, "bulk", &view{Title: "Confirm bulk " + o.Op, Nav: "dead", Data: d})
}

func (c *Console) bulkRun(w http.ResponseWriter, r *http.Request) {
	f, o, ok := c.postedBulk(w, r)
	if !ok {
		return
	}
	actor, err := c.actorOf(r)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	if o.Reason == "" {
		c.failErr(w, r, dlq.ErrReasonRequired)
		return
	}
	if o.Confirmed <= 0 {
		c.failErr(w, r, fmt.Errorf("%w: nothing was confirmed: run the dry run first and confirm its count", rdq.ErrInvalid))
		return
	}
	// Never touch more than the person confirmed.
	limit := o.Confirmed
	if o.Max > 0 {
		limit = min(limit, o.Max)
	}
	j := &job{Op: o.Op, Filter: f, Actor: actor, Reason: o.Reason, Confirmed: o.Confirmed, Started: time.Now().UTC()}
	c.jobs.start(j, func(ctx context.Context, j *job) {
		var err error
		if j.Op == "redrive" {
			var res dlq.RedriveResult
			res, err = c.dlq.Redrive(ctx, f, dlq.RedriveOptions{
				Actor: actor, Reason: o.Reason, All: o.All, Max: limit, Delay: o.Delay, Spread: o.Spread,
				MaxLife: o.maxLife(), Progress: j.progress,
			})
			j.mu.Lock()
			j.redrive = res
			j.mu.Unlock()
		} else {
			var res dlq.PurgeResult
			res, err = c.dlq.Purge(ctx, f, dlq.PurgeOptions{Actor: actor, Reason: o.Reason, All: o.All, Max: limit, Progress: j.progress})
			j.mu.Lock()
			j.purge = res
			j.mu.Unlock()
		}
		if err != nil {
			c.log.Error("console: bulk action failed", "op", j.Op, "actor", actor, "filter", f.String(), "error", err)
		}
		j.mu.Lock()
		j.finished, j.err, j.ended = true, err, time.Now().UTC()
		j.mu.Unlock()
	})
	http.Redirect(w, r, c.url("/jobs/"+j.ID), http.StatusSeeOther)
}

type jobData struct {
	jobState
	FilterText string
	AuditURL   string
	ErrText    string
}

func (c *Console) job(w http.ResponseWriter, r *http.Request) {
	// A bulk action over queues the principal may not read is answered as
	// a missing one.
	j, ok := c.jobs.get(r.PathValue("id"))
	if !ok || !c.can(r, ActionRead, j.Filter.Queue) {
		c.fail(w, r, http.StatusNotFound, errors.New("no such bulk action (the console forgets old ones, and all of them when it restarts; the audit log keeps every change)"))
		return
	}
	s := j.state()
	d := jobData{jobState: s, FilterText: j.Filter.String()}
	d.AuditURL = withQuery(c.url("/audit"), url.Values{
		"actor": {j.Actor}, "action": {j.Op}, "since": {j.Started.Truncate(time.Second).Format(time.RFC3339)},
	})
	if s.Err != nil {
		d.ErrText = s.Err.Error()
		if statusOf(s.Err) >= 500 {
			d.ErrText = "the action stopped on an error; what was done before it is committed and audited (the error is in the server log)"
		}
	}
	v := &view{Title: "Bulk " + j.Op, Nav: "dead", Data: d}
	if !s.Finished {
		v.Refresh = 1
	}
	c.render(w, r, http.StatusOK, "job", v)
}

// --- Audit log --------------------------------------------------------------

// auditPage is the number of entries per audit page; maxAuditScan bounds
// the entries read to fill a page filtered by queue.
const (
	auditPage    = 50
	maxAuditScan = 5000
)

var auditActions = []string{dlq.ActionRedrive, dlq.ActionEditPayload, dlq.ActionPurge, dlq.ActionRetention, "pause", "resume", "retry_now", "cancel", "pause_handler", "resume_handler"}

type auditData struct {
	Actor, Action, Queue, Since, Until string
	Actions                            []string
	Entries                            []auditRow
	Next                               string
	Scanned                            bool
}

func (c *Console) audit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := auditData{Actor: q.Get("actor"), Action: q.Get("action"), Queue: strings.TrimSpace(q.Get("queue")), Since: q.Get("since"), Until: q.Get("until"), Actions: auditActions}
	if d.Queue != "" {
		if err := rdq.ValidateName("queue", d.Queue); err != nil {
			c.failErr(w, r, err)
			return
		}
	}
	if err := c.allow(r, ActionRead, d.Queue); err != nil {
		c.failErr(w, r, err)
		return
	}
	aq := dlq.AuditQuery{Actor: strings.TrimSpace(d.Actor), Action: d.Action, Limit: auditPage}
	var err error
	if aq.Since, err = parseTime(c.now(), "since", d.Since); err != nil {
		c.failErr(w, r, err)
		return
	}
	if aq.Until, err = parseTime(c.now(), "until", d.Until); err != nil {
		c.failErr(w, r, err)
		return
	}
	if s := q.Get("before"); s != "" {
		if aq.BeforeID, err = strconv.ParseInt(s, 10, 64); err != nil {
			c.failErr(w, r, fmt.Errorf("%w: before %q is not an entry id", rdq.ErrInvalid, clip(s)))
			return
		}
	}
	if d.Queue != "" {
		aq.Limit = 200
	}
	scanned := 0
	more := false
	for {
		entries, err := c.dlq.Audit(r.Context(), aq)
		if err != nil {
			c.failErr(w, r, err)
			return
		}
		for _, e := range entries {
			row := newAuditRow(e)
			aq.BeforeID = e.ID
			if d.Queue != "" && !e.TouchesQueue(d.Queue) {
				continue
			}
			d.Entries = append(d.Entries, row)
			if len(d.Entries) == auditPage {
				break
			}
		}
		scanned += len(entries)
		more = len(entries) == aq.Limit || len(d.Entries) == auditPage
		if len(d.Entries) >= auditPage || len(entries) < aq.Limit || d.Queue == "" {
			break
		}
		if scanned >= maxAuditScan {
			d.Scanned = true
			break
		}
	}
	if more && aq.BeforeID > 0 {
		v := url.Values{"actor": {d.Actor}, "action": {d.Action}, "queue": {d.Queue}, "since": {d.Since}, "until": {d.Until}, "before": {strconv.FormatInt(aq.BeforeID, 10)}}
		d.Next = withQuery(c.url("/audit"), v)
	}
	c.render(w, r, http.StatusOK, "audit", &view{Title: "Audit log", Nav: "audit", Live: true, Data: d})
}
