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

func (c *Console) knownNames(r *http.Request) (names, error) {
	var n names
	if c.activityCharts == nil {
		return n, nil
	}
	ch, err := c.activityCharts.get(r.Context())
	if err != nil {
		return n, err
	}
	_, lines := c.seriesView(r, ch.val.hours)
	for _, l := range lines {
		n.Queues = append(n.Queues, l.Queue)
		n.Handlers = append(n.Handlers, l.Handler)
	}
	slices.Sort(n.Queues)
	slices.Sort(n.Handlers)
	n.Queues, n.Handlers = slices.Compact(n.Queues), slices.Compact(n.Handlers)
	return n, nil
}

// canonicalHandler returns handler as typed when a known handler (see
// knownNames) has that name or none matches it but for case, else the
// known handler it matches ignoring case: handler names are exact in the
// stores, "Send" finds the tasks of "send".
func (c *Console) canonicalHandler(r *http.Request, handler string) (string, error) {
	if handler == "" {
		return handler, nil
	}
	n, err := c.knownNames(r)
	if err != nil || slices.Contains(n.Handlers, handler) {
		return handler, err
	}
	for _, h := range n.Handlers {
		if strings.EqualFold(h, handler) {
			return h, nil
		}
	}
	return handler, nil
}

// Names are the suggestions of the filter forms.
func (v *view) Names() (names, error) { return v.c.knownNames(v.r) }
