package console

import (
	"net/http"
	"slices"
	"strings"
)

// names are the queues and handlers the filter forms suggest: those with
// attempts in the last 24 hours, by the activity series (stores with a
// store.SeriesReader; none otherwise), of the queues the principal may
// read.
type names struct {
	Queues, Handlers []string
}

// knownNames returns the suggestions. They are a convenience: when the
// series cannot be read, the error is logged and the page goes on without
// them (and handlers match exactly).
func (c *Console) knownNames(r *http.Request) names {
	var n names
	if c.activityCharts == nil {
		return n
	}
	ch, err := c.activityCharts.get(r.Context())
	if err != nil {
		c.log.ErrorContext(r.Context(), "console: reading the queues and handlers to suggest", "error", err)
		return n
	}
	_, lines := c.seriesView(r, ch.val.hours)
	for _, l := range lines {
		n.Queues = append(n.Queues, l.Queue)
		n.Handlers = append(n.Handlers, l.Handler)
	}
	slices.Sort(n.Queues)
	slices.Sort(n.Handlers)
	n.Queues, n.Handlers = slices.Compact(n.Queues), slices.Compact(n.Handlers)
	return n
}

// canonicalHandler returns handler as typed when a known handler (see
// knownNames) has that name or none matches it but for case, else the
// known handler it matches ignoring case: handler names are exact in the
// stores, "Send" finds the tasks of "send".
func (c *Console) canonicalHandler(r *http.Request, handler string) string {
	if handler == "" {
		return handler
	}
	n := c.knownNames(r)
	if slices.Contains(n.Handlers, handler) {
		return handler
	}
	for _, h := range n.Handlers {
		if strings.EqualFold(h, handler) {
			return h
		}
	}
	return handler
}

// Names are the suggestions of the filter forms.
func (v *view) Names() names { return v.c.knownNames(v.r) }
