package console

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// The activity charts: attempts and their outcomes per minute over the
// last hour and per hour over the last day, from the store's
// store.SeriesReader.
const (
	activityMinutes = 60
	activityHours   = 24
)

// seriesView is one chart: the sum of the lines a page shows.
type seriesView struct {
	Start  time.Time
	Width  time.Duration
	Counts []store.SeriesCounts
	Total  store.SeriesCounts
	// Partial, when not zero, is where the counts become complete (see
	// store.Series.PartialUntil).
	Partial time.Time
}

// activityLine is one queue and handler of a series, summed over it.
type activityLine struct {
	Queue, Handler string
	Total          store.SeriesCounts
	// Failures counts the failed attempts of each bucket, for a
	// sparkline.
	Failures []int64
}

// activitySeries is what the overview charts: every queue's series per
// minute over the last hour and per hour over the last day.
type activitySeries struct {
	minutes, hours store.Series
}

// readActivity reads the overview's series.
func readActivity(ctx context.Context, sr store.SeriesReader) (activitySeries, error) {
	var a activitySeries
	var err error
	if a.minutes, err = sr.Series(ctx, store.SeriesParams{Width: time.Minute, Buckets: activityMinutes}); err != nil {
		return a, err
	}
	a.hours, err = sr.Series(ctx, store.SeriesParams{Width: time.Hour, Buckets: activityHours})
	return a, err
}

// readSeries reads the series of queue and handler (every one when empty)
// and returns what r may see of it (see seriesView).
func (c *Console) readSeries(ctx context.Context, r *http.Request, sr store.SeriesReader, width time.Duration, buckets int, queue, handler string) (seriesView, []activityLine, error) {
	s, err := sr.Series(ctx, store.SeriesParams{Width: width, Buckets: buckets, Queue: queue, Handler: handler})
	if err != nil {
		return seriesView{}, nil, err
	}
	v, lines := c.seriesView(r, s)
	return v, lines, nil
}

// seriesView keeps the lines of s of the queues r may read, and sums them.
func (c *Console) seriesView(r *http.Request, s store.Series) (seriesView, []activityLine) {
	v := seriesView{Start: s.Start, Width: s.Width, Partial: s.PartialUntil}
	all := c.can(r, ActionRead, AllQueues)
	var lines []activityLine
	for _, l := range s.Lines {
		if !all && !c.can(r, ActionRead, l.Queue) {
			continue
		}
		if v.Counts == nil {
			v.Counts = make([]store.SeriesCounts, len(l.Counts))
		}
		line := activityLine{Queue: l.Queue, Handler: l.Handler, Failures: make([]int64, len(l.Counts))}
		for i, n := range l.Counts {
			v.Counts[i] = v.Counts[i].Add(n)
			line.Total = line.Total.Add(n)
			line.Failures[i] = n.Retryable + n.Permanent
		}
		v.Total = v.Total.Add(line.Total)
		lines = append(lines, line)
	}
	return v, lines
}

type activityData struct {
	Queue, Handler string
	Minutes, Hours seriesView
	Lines          []activityLine
}

// activity shows the series (routed when c.series is set) of one queue, one handler, one pair or all,
// with a line per queue and handler.
func (c *Console) activity(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := activityData{Queue: strings.TrimSpace(q.Get(qQueue)), Handler: strings.TrimSpace(q.Get(qHandler))}
	if d.Queue != "" {
		if err := rdq.ValidateName("queue", d.Queue); err != nil {
			c.failErr(w, r, err)
			return
		}
	}
	if d.Handler != "" {
		if err := rdq.ValidateName("handler", d.Handler); err != nil {
			c.failErr(w, r, err)
			return
		}
	}
	if err := c.allow(r, ActionRead, d.Queue); err != nil {
		c.failErr(w, r, err)
		return
	}
	var err error
	if d.Minutes, d.Lines, err = c.readSeries(r.Context(), r, c.series, time.Minute, activityMinutes, d.Queue, d.Handler); err != nil {
		c.failErr(w, r, err)
		return
	}
	if d.Hours, _, err = c.readSeries(r.Context(), r, c.series, time.Hour, activityHours, d.Queue, d.Handler); err != nil {
		c.failErr(w, r, err)
		return
	}
	title := "Activity"
	switch {
	case d.Queue != "" && d.Handler != "":
		title = "Activity of " + d.Queue + " / " + d.Handler
	case d.Queue != "":
		title = "Activity of queue " + d.Queue
	case d.Handler != "":
		title = "Activity of handler " + d.Handler
	}
	c.render(w, r, http.StatusOK, "activity", &view{Title: title, Nav: "activity", Live: true, Data: d})
}

// seriesChart draws a series as stacked SVG bars, oldest first: successes,
// retryable and permanent failures, with a mark above each bucket with
// dead-letterings. Only numbers and formatted times go into the markup.
func seriesChart(v seriesView) template.HTML {
	const w, h, pad = 720, 160, 20
	var peak int64
	for _, n := range v.Counts {
		peak = max(peak, n.Successes+n.Retryable+n.Permanent)
	}
	span := "hour"
	if v.Width == time.Hour {
		span = fmt.Sprintf("%d hours", len(v.Counts))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart series" viewBox="0 0 %d %d" role="img" aria-label="last %s: %s attempts, %s succeeded, %s failed and will be retried, %s failed for good, %s dead-lettered">`,
		w, h+pad, span, formatNum(v.Total.Attempts), formatNum(v.Total.Successes), formatNum(v.Total.Retryable),
		formatNum(v.Total.Permanent), formatNum(v.Total.DeadLettered))
	if len(v.Counts) == 0 {
		b.WriteString(`</svg>`)
		return template.HTML(b.String())
	}
	bw := float64(w) / float64(len(v.Counts))
	scale := func(n int64) float64 {
		if peak == 0 || n == 0 {
			return 0
		}
		return max(float64(h-14)*float64(n)/float64(peak), 1.5)
	}
	layout := "15:04"
	if v.Width == time.Hour {
		layout = "Jan 2 15:04"
	}
	for i, n := range v.Counts {
		from := v.Start.Add(time.Duration(i) * v.Width).UTC()
		fmt.Fprintf(&b, `<g><title>%s–%s UTC: %s attempts, %s succeeded, %s retryable, %s permanent, %s dead-lettered</title>`,
			from.Format(layout), from.Add(v.Width).Format("15:04"), formatNum(n.Attempts), formatNum(n.Successes),
			formatNum(n.Retryable), formatNum(n.Permanent), formatNum(n.DeadLettered))
		y := float64(h)
		for _, part := range []struct {
			class string
			n     int64
		}{{"ok", n.Successes}, {"retry", n.Retryable}, {"perm", n.Permanent}} {
			if bh := scale(part.n); bh > 0 {
				y -= bh
				fmt.Fprintf(&b, `<rect class="%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f"></rect>`, part.class, float64(i)*bw+0.5, y, max(bw-1, 1), bh)
			}
		}
		if n.DeadLettered > 0 {
			fmt.Fprintf(&b, `<rect class="dl" x="%.1f" y="%.1f" width="%.1f" height="3"></rect>`, float64(i)*bw+0.5, max(y-6, 0), max(bw-1, 1))
		}
		fmt.Fprintf(&b, `<rect class="hit" x="%.1f" y="0" width="%.1f" height="%d"></rect></g>`, float64(i)*bw, bw, h)
	}
	fmt.Fprintf(&b, `<line class="axis" x1="0" y1="%d" x2="%d" y2="%d"></line>`, h, w, h)
	step := max(len(v.Counts)/6, 1)
	for i := 0; i < len(v.Counts); i += step {
		fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%d">%s</text>`, float64(i)*bw+2, h+pad-4, v.Start.Add(time.Duration(i)*v.Width).UTC().Format("15:04"))
	}
	per := "minute"
	if v.Width == time.Hour {
		per = "hour"
	}
	fmt.Fprintf(&b, `<text class="peak" x="4" y="12">peak %s finished attempts per %s</text></svg>`, formatNum(peak), per)
	return template.HTML(b.String())
}
