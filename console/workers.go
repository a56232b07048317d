package console

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// workerRow is one registered worker as a person may see it: only the
// queues they may read, and its in-flight count only when it counts no
// other queue.
type workerRow struct {
	store.WorkerInfo
	Visible []string
	// Partial is set when the worker also runs queues the person may not
	// read: its in-flight count, over all its queues, is not shown.
	Partial bool
}

type workersData struct {
	Queue    string
	Workers  []workerRow
	Live     int64
	Stale    int64
	Unserved []store.UnservedHandler
}

// visibleWorkers returns the workers serving queue (every queue when
// empty), each with the queues r may read, and the waiting tasks of those
// queues that no live worker serves.
func (c *Console) visibleWorkers(r *http.Request, queue string) ([]workerRow, []store.UnservedHandler, error) {
	ctx := r.Context()
	ws, err := c.registry.Workers(ctx, store.WorkersParams{Queue: queue})
	if err != nil {
		return nil, nil, err
	}
	var queues []string
	if queue != "" {
		queues = []string{queue}
	}
	us, err := c.registry.UnservedHandlers(ctx, store.UnservedParams{Queues: queues})
	if err != nil {
		return nil, nil, err
	}
	all := c.can(r, ActionRead, AllQueues)
	var rows []workerRow
	for _, w := range ws {
		row := workerRow{WorkerInfo: w}
		for _, q := range w.Queues {
			if all || c.can(r, ActionRead, q) {
				row.Visible = append(row.Visible, q)
			}
		}
		if len(row.Visible) > 0 {
			if row.Partial = len(row.Visible) < len(w.Queues); row.Partial {
				row.InFlight = 0
			}
			rows = append(rows, row)
		}
	}
	var out []store.UnservedHandler
	for _, u := range us {
		if all || c.can(r, ActionRead, u.Queue) {
			out = append(out, u)
		}
	}
	return rows, out, nil
}

func (c *Console) workers(w http.ResponseWriter, r *http.Request) {
	queue := strings.TrimSpace(r.URL.Query().Get("queue"))
	if queue != "" {
		if err := rdq.ValidateName("queue", queue); err != nil {
			c.failErr(w, r, err)
			return
		}
	}
	if queue != "" {
		if err := c.allow(r, ActionRead, queue); err != nil {
			c.failErr(w, r, err)
			return
		}
	}
	rows, us, err := c.visibleWorkers(r, queue)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	// A person with grants on some queues sees their part; one who may
	// read nothing is refused.
	if queue == "" && len(rows) == 0 && len(us) == 0 {
		if err := c.allow(r, ActionRead, AllQueues); err != nil {
			c.failErr(w, r, err)
			return
		}
	}
	d := workersData{Queue: queue, Workers: rows, Unserved: us}
	for _, row := range rows {
		if row.Stale {
			d.Stale++
		} else {
			d.Live++
		}
	}
	c.render(w, r, http.StatusOK, "workers", &view{Title: "Workers", Nav: "workers", Live: true, Data: d})
}

// overviewWorkers marks the queues of d with waiting tasks and no live
// worker, and lists the waiting tasks no live worker serves, when the
// store keeps a worker registry.
func (c *Console) overviewWorkers(r *http.Request, d *overviewData) error {
	if c.registry == nil {
		return nil
	}
	rows, us, err := c.visibleWorkers(r, "")
	if err != nil {
		return err
	}
	served := map[string]bool{}
	for _, w := range rows {
		if !w.Stale {
			for _, q := range w.Queues {
				served[q] = true
			}
		}
	}
	d.HasRegistry = true
	for i := range d.Queues {
		q := &d.Queues[i]
		q.NoLiveWorker = q.Pending > 0 && !served[q.Queue]
	}
	d.Unserved = us
	return nil
}

// formatAge is d in its largest whole unit: 42s, 4m, 5h, 3d.
func formatAge(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int64(d/time.Second), 1))
	case d < time.Hour:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return fmt.Sprintf("%dd", d/(24*time.Hour))
}
