package console

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// find opens the task a person names: by its id, or by its idempotency key
// in a queue (stores that list live tasks). A task of a queue the person
// may not read is answered as missing, as on the task page.
func (c *Console) find(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	text, queue := strings.TrimSpace(q.Get("q")), strings.TrimSpace(q.Get(qQueue))
	if text == "" {
		c.failErr(w, r, fmt.Errorf("%w: nothing to find: give a task id, or an idempotency key and its queue", rdq.ErrInvalid))
		return
	}
	if id, err := rdq.ParseID(text); err == nil {
		http.Redirect(w, r, c.url("/tasks/"+id.String()), http.StatusSeeOther)
		return
	}
	if c.tasks == nil {
		c.failErr(w, r, fmt.Errorf("%w: %q is not a task id (and this store cannot look tasks up by idempotency key)", rdq.ErrInvalid, clip(text)))
		return
	}
	if queue == "" {
		c.failErr(w, r, fmt.Errorf("%w: %q is not a task id; to find it as an idempotency key, give its queue too", rdq.ErrInvalid, clip(text)))
		return
	}
	if err := c.allow(r, ActionRead, queue); err != nil {
		c.failErr(w, r, fmt.Errorf("%w: no task holds key %q in queue %q", store.ErrNotFound, clip(text), clip(queue)))
		return
	}
	t, err := c.tasks.ByKey(r.Context(), queue, text)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	http.Redirect(w, r, c.url("/tasks/"+t.ID.String()), http.StatusSeeOther)
}
