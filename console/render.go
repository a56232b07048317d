package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// pageNames are the templates, each parsed with layout.html.
var pageNames = []string{"overview", "dead", "groups", "task", "edit", "bulk", "job", "audit", "error", "live", "workers", "activity"}

func (c *Console) parseTemplates() error {
	funcs := template.FuncMap{
		"url":       c.url,
		"withq":     withQuery,
		"ts":        timeHTML,
		"dur":       formatDuration,
		"span":      formatSpan,
		"age":       formatAge,
		"num":       formatNum,
		"bytes":     formatBytes,
		"barChart":  barChart,
		"spark":     sparkline,
		"series":    seriesChart,
		"failSpark": failSparkline,
		"stack":     viewStack,
		"clip":      clipText,
		"afterType": afterType,
		"etype":     errorTypeHTML,
		"long":      isLong,
		"firstLine": firstLine,
		"add":       func(a, b int) int { return a + b },
		"dict":      dict,
		"merge":     merge,
	}
	c.pages = make(map[string]*template.Template, len(pageNames))
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return fmt.Errorf("console: parsing template %s: %w", name, err)
		}
		c.pages[name] = t
	}
	return nil
}

// afterType is what follows an error's type where the type is shown just
// before its message: the message less a leading "type:" (a panic's message
// is "panic: …", which would read "panic panic: …"), else a space and the
// message.
func afterType(typ, msg string) string {
	if typ != "" && strings.HasPrefix(msg, typ+":") {
		return msg[len(typ):]
	}
	return " " + msg
}

// errorTypeHTML writes an error type, escaped, in a code element that
// lets it break after a '.', '/' or '_' (between "*json." and
// "SyntaxError") and inside a word only when a part alone is wider than
// its place.
func errorTypeHTML(typ string) template.HTML {
	var b strings.Builder
	b.WriteString(`<code class="etype">`)
	for _, r := range typ {
		b.WriteString(template.HTMLEscapeString(string(r)))
		if r == '.' || r == '/' || r == '_' {
			b.WriteString("<wbr>")
		}
	}
	b.WriteString("</code>")
	return template.HTML(b.String())
}

// A message longer than longLines lines or longChars characters is shown
// collapsed to its first line, opened on demand.
const (
	longLines = 4
	longChars = 400
)

// isLong reports whether s is shown collapsed.
func isLong(s string) bool {
	return strings.Count(s, "\n") >= longLines || utf8.RuneCountInString(s) > longChars
}

// firstLine is the start of s shown while it is collapsed: its first line,
// clipped.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return clipText(160, line)
}

// url joins the prefix and a console path.
func (c *Console) url(path string) string { return c.prefix + path }

// withQuery appends a query string to a URL; empty values are dropped.
func withQuery(u string, v url.Values) string {
	clean := url.Values{}
	for k, vs := range v {
		for _, s := range vs {
			if s != "" {
				clean.Add(k, s)
			}
		}
	}
	if len(clean) == 0 {
		return u
	}
	return u + "?" + clean.Encode()
}

// view is what every page template receives.
type view struct {
	c       *Console
	r       *http.Request
	Title   string
	Nav     string
	Live    bool
	Refresh int // seconds of a meta refresh; 0 for none
	Data    any
}

// Can reports whether the person may do a in queue; the templates use it
// to show only the controls that would be allowed.
func (v *view) Can(a Action, queue string) bool { return v.c.can(v.r, a, queue) }

// Self is the URL of this page, for live refreshes.
func (v *view) Self() string {
	u := v.c.prefix + v.r.URL.Path
	if v.r.URL.RawQuery != "" {
		u += "?" + v.r.URL.RawQuery
	}
	return u
}

// URL joins the prefix and a console path.
func (v *view) URL(path string) string { return v.c.url(path) }

// HasWorkers reports whether the store keeps a worker registry.
func (v *view) HasWorkers() bool { return v.c.registry != nil }

// HasSeries reports whether the store counts attempts over time.
func (v *view) HasSeries() bool { return v.c.series != nil }

// HasLive reports whether the store lists live tasks.
func (v *view) HasLive() bool { return v.c.tasks != nil }

// SignOut is the sign-out path, if any.
func (v *view) SignOut() string { return v.c.signOut }

// Actor is who the console thinks the person is.
func (v *view) Actor() string { return v.c.actor(v.r) }

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, page string, v *view) {
	v.c, v.r = c, r
	var buf bytes.Buffer
	if err := c.pages[page].Execute(&buf, v); err != nil {
		c.log.ErrorContext(r.Context(), "console: rendering a page", "page", page, "error", err)
		http.Error(w, "the page could not be rendered; the error is in the server log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes()) // the client went away; nothing to do
}

// fail renders the error page. Internal errors are logged and shown only
// as a generic message.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	msg := err.Error()
	if status >= 500 {
		c.log.ErrorContext(r.Context(), "console: request failed", "method", r.Method, "path", r.URL.Path, "error", err)
		msg = "something went wrong on the server; the error is in its log"
		if status == http.StatusServiceUnavailable {
			msg = "the request was cancelled or timed out; try again"
		}
	}
	c.render(w, r, status, "error", &view{Title: http.StatusText(status), Data: struct {
		Status  int
		Message string
	}{status, msg}})
}

// failErr renders err with the status it maps to.
func (c *Console) failErr(w http.ResponseWriter, r *http.Request, err error) {
	c.fail(w, r, statusOf(err), err)
}

// timeHTML renders t in UTC in a <time> element; the page's script adds
// the local time as its title.
func timeHTML(t time.Time) template.HTML {
	if t.IsZero() {
		return "—"
	}
	u := t.UTC()
	return template.HTML(fmt.Sprintf(`<time datetime="%s" title="%s">%s</time>`,
		u.Format(time.RFC3339Nano), u.Format("2006-01-02 15:04:05.000 UTC"), u.Format("2006-01-02 15:04:05")))
}

func formatDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Millisecond:
		return d.String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// formatNum writes n with thousands separators.
func formatNum(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, ch := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(ch)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func formatBytes(n int) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB (%d bytes)", float64(n)/1024, n)
	}
	return fmt.Sprintf("%.1f MiB (%d bytes)", float64(n)/(1<<20), n)
}

// clipText shortens s to about n characters for a table cell.
func clipText(n int, s string) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// barChart draws hourly counts as an SVG bar chart, oldest first, one bar
// per hour starting at start. Only numbers and formatted times go
// into the markup.
func barChart(counts []int64, start time.Time) template.HTML {
	const width = time.Hour
	const w, h, pad = 720, 160, 20
	var peak int64
	var total int64
	for _, n := range counts {
		peak = max(peak, n)
		total += n
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="%s tasks went dead in the last %d hours">`, w, h+pad, formatNum(total), len(counts))
	if len(counts) == 0 {
		b.WriteString(`</svg>`)
		return template.HTML(b.String())
	}
	bw := float64(w) / float64(len(counts))
	for i, n := range counts {
		bh := 0.0
		if peak > 0 {
			bh = float64(h-4) * float64(n) / float64(peak)
		}
		if n > 0 && bh < 2 {
			bh = 2
		}
		from := start.Add(time.Duration(i) * width).UTC()
		fmt.Fprintf(&b, `<g><title>%s–%s UTC: %s</title><rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f"></rect><rect class="hit" x="%.1f" y="0" width="%.1f" height="%d"></rect></g>`,
			from.Format("Jan 2 15:04"), from.Add(width).Format("15:04"), formatNum(n),
			float64(i)*bw+1, float64(h)-bh, bw-2, bh, float64(i)*bw, bw, h)
	}
	fmt.Fprintf(&b, `<line class="axis" x1="0" y1="%d" x2="%d" y2="%d"></line>`, h, w, h)
	for i := 0; i < len(counts); i += 6 {
		fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%d">%s</text>`, float64(i)*bw+2, h+pad-4, start.Add(time.Duration(i)*width).UTC().Format("15:04"))
	}
	fmt.Fprintf(&b, `<text class="peak" x="4" y="12">peak %s per hour, %s in all</text></svg>`, formatNum(peak), formatNum(total))
	return template.HTML(b.String())
}

// sparkline draws counts of dead tasks over span as a small SVG bar chart.
func sparkline(counts []int64, span time.Duration) template.HTML {
	return spark(counts, func(total string) string { return total + " went dead in the last " + formatSpan(span) })
}

// failSparkline draws counts of failed attempts per minute as a small SVG
// bar chart.
func failSparkline(counts []int64) template.HTML {
	return spark(counts, func(total string) string {
		return fmt.Sprintf("%s failed attempts in the last %d minutes", total, len(counts))
	})
}

// formatSpan writes a span of whole minutes as hours and minutes: "1 h",
// "90 min", "24 h".
func formatSpan(d time.Duration) string {
	if d%time.Hour == 0 {
		return fmt.Sprintf("%d h", d/time.Hour)
	}
	return fmt.Sprintf("%d min", d/time.Minute)
}

// spark draws counts as a small SVG bar chart; label makes its accessible
// name from the total (only numbers and fixed words go into it).
func spark(counts []int64, label func(total string) string) template.HTML {
	const w, h = 120, 24
	var peak, total int64
	for _, n := range counts {
		peak = max(peak, n)
		total += n
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="spark" viewBox="0 0 %d %d" role="img" aria-label="%s">`, w, h, label(formatNum(total)))
	if len(counts) > 0 && peak > 0 {
		bw := float64(w) / float64(len(counts))
		for i, n := range counts {
			if n == 0 {
				continue
			}
			bh := max(float64(h)*float64(n)/float64(peak), 1.5)
			fmt.Fprintf(&b, `<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f"></rect>`, float64(i)*bw, float64(h)-bh, max(bw-1, 1), bh)
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// payloadView is a payload prepared for display.
type payloadView struct {
	// Kind is "json", "text" or "hex".
	Kind        string
	Text        string
	Size        int
	ContentType string
	// Truncated reports that the hex dump shows only the start.
	Truncated bool
	// Editable reports that the payload can be edited as text.
	Editable bool
}

// maxHexDump bounds the hex view of a binary payload.
const maxHexDump = 16 << 10

// isJSONType reports whether a content type says JSON (application/json,
// or any +json type).
func isJSONType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		mt = strings.ToLower(strings.TrimSpace(strings.SplitN(ct, ";", 2)[0]))
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json") || mt == "text/json"
}

// isText reports whether b is UTF-8 without control characters other than
// tab and line breaks.
func isText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if r < ' ' && r != '\n' && r != '\r' && r != '\t' || r == 0x7f {
			return false
		}
	}
	return true
}

func viewPayload(p []byte, contentType string) payloadView {
	v := payloadView{Size: len(p), ContentType: contentType}
	if isJSONType(contentType) && json.Valid(p) {
		var out bytes.Buffer
		if err := json.Indent(&out, p, "", "  "); err == nil {
			v.Kind, v.Text, v.Editable = "json", out.String(), true
			return v
		}
	}
	if isText(p) {
		v.Kind, v.Text, v.Editable = "text", string(p), true
		return v
	}
	v.Kind = "hex"
	shown := p
	if len(shown) > maxHexDump {
		shown, v.Truncated = shown[:maxHexDump], true
	}
	v.Text = hexDump(shown)
	return v
}

// hexDump formats b as offset, 16 hex bytes and their printable ASCII.
func hexDump(b []byte) string {
	var s strings.Builder
	for off := 0; off < len(b); off += 16 {
		line := b[off:min(off+16, len(b))]
		fmt.Fprintf(&s, "%08x  ", off)
		for i := range 16 {
			if i < len(line) {
				fmt.Fprintf(&s, "%02x ", line[i])
			} else {
				s.WriteString("   ")
			}
			if i == 7 {
				s.WriteByte(' ')
			}
		}
		s.WriteString(" |")
		for _, c := range line {
			if c >= 0x20 && c < 0x7f {
				s.WriteByte(c)
			} else {
				s.WriteByte('.')
			}
		}
		s.WriteString("|\n")
	}
	return s.String()
}

// dict builds query values from key, value pairs.
func dict(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

// merge returns a copy of base with the key, value pairs set.
func merge(base url.Values, kv ...string) url.Values {
	v := url.Values{}
	for k, vs := range base {
		v[k] = append([]string(nil), vs...)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}
