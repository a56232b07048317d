package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/tasks"
)

// The live-task pages need a store with store.LiveTasks (package tasks);
// without it the console has no Tasks tab.

// The live tabs: the store's task states, with its pending tasks split in
// two: those due now (Pending) and those due later (Scheduled, tabScheduled).
const tabScheduled store.TaskState = "scheduled"

var liveStates = []store.TaskState{store.StatePending, store.StateRetrying, tabScheduled, store.StateInFlight, store.StateSucceeded}

// liveLabels name the live tabs.
var liveLabels = map[store.TaskState]string{
	store.StatePending:   "Pending",
	store.StateRetrying:  "Retrying",
	tabScheduled:         "Scheduled",
	store.StateInFlight:  "In flight",
	store.StateSucceeded: "Succeeded",
}

// liveTitles say what each tab lists.
var liveTitles = map[store.TaskState]string{
	store.StatePending:   "Not tried yet in their current life, due now",
	store.StateRetrying:  "Failed at least once in their current life, waiting for their next try",
	tabScheduled:         "Not tried yet in their current life, due later: submitted with a delay or redriven with a spread",
	store.StateInFlight:  "Being run by a worker",
	store.StateSucceeded: "Succeeded and still retained",
}

// maxTabCount bounds the tasks counted for a tab; more read as "1,000+".
const maxTabCount = 1000

// tabCount is the number of tasks a tab lists, up to maxTabCount.
type tabCount struct {
	N    int64
	More bool
}

type liveData struct {
	State  store.TaskState
	States []store.TaskState
	Labels map[store.TaskState]string
	Titles map[store.TaskState]string
	Counts map[store.TaskState]tabCount
	Filter tasks.Filter
	Values url.Values
	Tasks  []liveRow
	Next   string
	Done   string
}

// liveRow is one listed task and why it waits, for the waiting states.
type liveRow struct {
	*rdq.Task
	// Held: the task's handler is paused, so it waits whatever its due
	// time.
	Held bool
	// Scheduled: not held, never tried in its current life and due later
	// (submitted with a delay or redriven with a spread).
	Scheduled bool
}

// liveRows marks the waiting tasks of paused handlers held and the ones
// not tried yet and due after now scheduled.
func liveRows(ts []*rdq.Task, state store.TaskState, paused []store.HandlerPause, now time.Time) []liveRow {
	held := map[[2]string]bool{}
	for _, p := range paused {
		held[[2]string{p.Queue, p.Handler}] = true
	}
	waiting := state == store.StatePending || state == store.StateRetrying || state == tabScheduled
	rows := make([]liveRow, len(ts))
	for i, t := range ts {
		rows[i].Task = t
		if !waiting {
			continue
		}
		rows[i].Held = held[[2]string{t.Queue, t.Handler}]
		rows[i].Scheduled = !rows[i].Held && t.Attempts == 0 && t.NextAttemptAt.After(now)
	}
	return rows
}

// liveFilter reads the live-task filter from the query string; it shares
// the dead-task filter's fields, less the dead-time range.
func liveFilter(v url.Values) (tasks.Filter, error) {
	f := tasks.Filter{
		Queue:           strings.TrimSpace(v.Get(qQueue)),
		Handler:         strings.TrimSpace(v.Get(qHandler)),
		ErrorType:       strings.TrimSpace(v.Get(qErrorType)),
		Fingerprint:     strings.ToLower(strings.TrimSpace(v.Get(qFingerprint))),
		MessageContains: v.Get(qMessage),
	}
	return f, f.Validate()
}

// listTab lists a page of a live tab at now: the store state, less the
// pending tasks due later for Pending, only those for Scheduled. The next
// page token is empty when the page is the last.
func (c *Console) listTab(r *http.Request, tab store.TaskState, f tasks.Filter, now time.Time, size int, token string) (tasks.Page, error) {
	state, opts := tab, tasks.ListOptions{PageSize: size, PageToken: token}
	if tab == tabScheduled {
		state, opts.DueAfter = store.StatePending, now
	}
	page, err := c.tasks.List(r.Context(), state, f, opts)
	if err != nil || tab != store.StatePending {
		return page, err
	}
	// Pending lists in due order: the tasks due later end it.
	for i, t := range page.Tasks {
		if t.NextAttemptAt.After(now) {
			page.Tasks, page.NextPageToken = page.Tasks[:i], ""
			break
		}
	}
	return page, nil
}

// tabCounts counts what each live tab lists, up to maxTabCount each.
func (c *Console) tabCounts(r *http.Request, f tasks.Filter, now time.Time) (map[store.TaskState]tabCount, error) {
	counts := map[store.TaskState]tabCount{}
	for _, tab := range liveStates {
		page, err := c.listTab(r, tab, f, now, maxTabCount, "")
		if err != nil {
			return nil, err
		}
		counts[tab] = tabCount{N: int64(len(page.Tasks)), More: page.NextPageToken != ""}
	}
	return counts, nil
}

func (c *Console) live(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state := store.TaskState(q.Get("state"))
	if state == "" {
		state = store.StatePending
	}
	if !state.Valid() && state != tabScheduled {
		c.failErr(w, r, fmt.Errorf("%w: state %q: use pending, retrying, scheduled, in_flight or succeeded", rdq.ErrInvalid, clip(string(state))))
		return
	}
	f, err := liveFilter(q)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	f.Handler = c.canonicalHandler(r, f.Handler)
	if err := c.allow(r, ActionRead, f.Queue); err != nil {
		c.failErr(w, r, err)
		return
	}
	now := c.now()
	page, err := c.listTab(r, state, f, now, 0, q.Get("page"))
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	counts, err := c.tabCounts(r, f, now)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	var paused []store.HandlerPause
	if state == store.StatePending || state == store.StateRetrying || state == tabScheduled {
		if paused, _, err = c.pausedHandlers(r, true); err != nil {
			c.failErr(w, r, err)
			return
		}
	}
	v := url.Values{qQueue: {f.Queue}, qHandler: {f.Handler}, qErrorType: {f.ErrorType}, qFingerprint: {f.Fingerprint}, qMessage: {f.MessageContains}}
	d := liveData{State: state, States: liveStates, Labels: liveLabels, Titles: liveTitles, Counts: counts, Filter: f, Values: v,
		Tasks: liveRows(page.Tasks, state, paused, now), Done: doneMessage(r)}
	if page.NextPageToken != "" {
		d.Next = withQuery(c.url("/live"), merge(v, "state", string(state), "page", page.NextPageToken))
	}
	c.render(w, r, http.StatusOK, "live", &view{Title: "Live tasks", Nav: "live", Live: true, Data: d})
}

// liveChange runs retry-now or cancel on the task named in the path.
func (c *Console) liveChange(w http.ResponseWriter, r *http.Request) {
	cancel := strings.HasSuffix(r.URL.Path, "/cancel")
	a := ActionRetryNow
	if cancel {
		a = ActionCancel
	}
	det, err := c.loadTask(r, a)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	actor, err := c.actorOf(r)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	ch := tasks.Change{Actor: actor, Reason: strings.TrimSpace(r.PostFormValue("reason"))}
	var errs []error
	done := "retried"
	if cancel {
		done = "cancelled"
		errs, err = c.tasks.Cancel(r.Context(), []rdq.ID{det.Task.ID}, ch)
	} else {
		errs, err = c.tasks.RetryNow(r.Context(), []rdq.ID{det.Task.ID}, ch)
	}
	if err == nil && len(errs) == 1 && errs[0] != nil {
		err = errs[0]
	}
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, c.url("/tasks/"+det.Task.ID.String()+"?done="+done), http.StatusSeeOther)
}
