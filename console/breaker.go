package console

import (
	"errors"
	"net/http"
	"strings"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// Handler circuit breakers, on stores that pause single handlers
// (store.HandlerPauser): the overview lists the paused handlers with their
// breaker state, and people allowed to pause a queue may pause or resume
// one handler of it.

// pausedHandlers returns the paused handlers the person may read, or nil
// when the store has no breakers.
func (c *Console) pausedHandlers(r *http.Request, all bool) ([]store.HandlerPause, bool, error) {
	hp, ok := store.HandlerPauserOf(c.st)
	if !ok {
		return nil, false, nil
	}
	ps, err := hp.PausedHandlers(r.Context(), "")
	if err != nil {
		return nil, true, err
	}
	var out []store.HandlerPause
	for _, p := range ps {
		if all || c.can(r, ActionRead, p.Queue) {
			out = append(out, p)
		}
	}
	return out, true, nil
}

func (c *Console) handlerPause(w http.ResponseWriter, r *http.Request) {
	pause := strings.HasSuffix(r.URL.Path, "/pause")
	queue := strings.TrimSpace(r.PostFormValue("queue"))
	handler := strings.TrimSpace(r.PostFormValue("handler"))
	if err := rdq.ValidateName("queue", queue); err != nil {
		c.failErr(w, r, err)
		return
	}
	if err := rdq.ValidateName("handler", handler); err != nil {
		c.failErr(w, r, err)
		return
	}
	actor, reason, ok := c.pauseForm(w, r, queue)
	if !ok {
		return
	}
	hp, ok := store.HandlerPauserOf(c.st)
	if !ok {
		c.fail(w, r, http.StatusNotImplemented, errors.New("this store cannot pause handlers"))
		return
	}
	var err error
	done := "handler_paused"
	if pause {
		_, err = hp.PauseHandler(r.Context(), store.PauseHandlerParams{Queue: queue, Handler: handler, Actor: actor, Reason: reason})
	} else {
		done = "handler_resumed"
		_, err = hp.ResumeHandler(r.Context(), store.ResumeHandlerParams{Queue: queue, Handler: handler, Actor: actor, Reason: reason})
	}
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	c.log.InfoContext(r.Context(), "console: "+strings.ReplaceAll(done, "_", " "), "queue", queue, "handler", handler, "actor", actor)
	http.Redirect(w, r, c.url("/?done="+done), http.StatusSeeOther)
}
