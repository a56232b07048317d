package envelope

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/srjn45/rdq"
	"runtime"
	"strings"
	"testing"
)

// The documents below are the shapes the allocation bound is held to: a
// task with a long attempt history as rdq writes it (messages, stacks,
// worker ids, times), and a task with a full payload.

// historyEnvelope returns a task document of about size bytes whose bulk is
// its attempt history.
func historyEnvelope(size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"version":1,"id":"0190a5b2-7c3e-7a41-8f00-3c1d2e4f5a6b","queue":"billing/charges","handler":"charge.card:v2",` +
		`"payload":"eyJ1c2VyX2lkIjo0MiwibG9jYWxlIjoiZW4ifQ==","content_type":"application/json",` +
		`"headers":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tenant":"acme"},` +
		`"status":"DEAD","attempts":3,"life":2,"lease_token":9,"lease_owner":"worker-a",` +
		`"created_at":"2024-06-01T12:00:00Z","updated_at":"2024-06-01T12:00:01.5Z","finished_at":"2024-06-01T12:00:01.5Z",` +
		`"last_error":{"type":"*mail.HTTPError","message":"POST https://mail.example.com/send: 503 Service Unavailable","fingerprint":"a05cf72e81dcf997"},` +
		`"history":[`)
	stack := `goroutine 7 [running]:\nmain.charge(...)\n\tcharge.go:42 +0x1d\nmain.handle(0xc000123456)\n\thandle.go:17 +0x8a\n`
	for n := 1; b.Len() < size-400; n++ {
		if n > 1 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"number":%d,"life":%d,"outcome":"RETRYABLE_FAILURE","error_type":"*mail.HTTPError",`+
			`"message":"POST https://mail.example.com/send: 503 Service Unavailable (request %d)","stack":"%s",`+
			`"worker_id":"worker-%d","lease_token":%d,"started_at":"2024-06-01T12:00:00.%03dZ","finished_at":"2024-06-01T12:00:01.%03dZ"}`,
			n, n/100, n, stack, n%7, n, n%1000, n%1000)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// shortAttemptsEnvelope returns a document of about size bytes holding as
// many short attempts as fit, the densest history a sender can write.
func shortAttemptsEnvelope(size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"version":1,"queue":"q","handler":"h","history":[`)
	for n := 1; b.Len() < size-100; n++ {
		if n > 1 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"number":%d,"outcome":"RETRYABLE_FAILURE","message":"attempt %d failed"}`, n, n)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// payloadEnvelope returns a submission carrying the largest payload allowed.
func payloadEnvelope() []byte {
	p := bytes.Repeat([]byte("rdq payload bytes "), rdq.MaxPayloadBytes/18+1)[:rdq.MaxPayloadBytes]
	return []byte(`{"version":1,"queue":"q","handler":"h","content_type":"application/octet-stream","payload":"` +
		base64.StdEncoding.EncodeToString(p) + `"}`)
}

// bytesAllocated reports the fewest bytes f allocated over a few runs.
func bytesAllocated(f func()) uint64 {
	var best uint64
	for i := range 3 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; i == 0 || n < best {
			best = n
		}
	}
	return best
}

// TestUnmarshalEnvelopeAllocation holds the decoder to allocating less than
// four times the size of the document it decodes.
func TestUnmarshalEnvelopeAllocation(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes several MiB")
	}
	docs := map[string][]byte{
		"4 MiB history":           historyEnvelope(4 << 20),
		"16 MiB history":          historyEnvelope(MaxBytes - 1024),
		"1 MiB payload":           payloadEnvelope(),
		"4 MiB of short attempts": shortAttemptsEnvelope(4 << 20),
	}
	for name, doc := range docs {
		t.Run(name, func(t *testing.T) {
			var err error
			n := bytesAllocated(func() { _, err = Unmarshal(doc) })
			if err != nil {
				t.Fatal(err)
			}
			ratio := float64(n) / float64(len(doc))
			t.Logf("%d-byte document: %d bytes allocated, %.2fx", len(doc), n, ratio)
			if ratio >= 4 {
				t.Errorf("decoding a %d-byte document allocated %d bytes, %.1fx its size; the bound is 4x", len(doc), n, ratio)
			}
		})
	}
}

// TestUnmarshalEnvelopeStopsAtFirstBadAttempt checks that an invalid second
// attempt is rejected before the rest of a long history is decoded: the
// work done is that of the first two items, not of the document.
func TestUnmarshalEnvelopeStopsAtFirstBadAttempt(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"version":1,"queue":"q","handler":"h","history":[{"number":1,"outcome":"SUCCESS"},{"number":2,"outcome":"BOGUS"}`)
	for n := 3; n <= 100_000; n++ {
		fmt.Fprintf(&b, `,{"number":%d,"outcome":"RETRYABLE_FAILURE","message":"attempt %d failed"}`, n, n)
	}
	b.WriteString(`]}`)
	doc := []byte(b.String())
	var err error
	n := bytesAllocated(func() { _, err = Unmarshal(doc) })
	assertInvalid(t, doc, `history[1].outcome "BOGUS" is not one of`)
	if n > 64<<10 {
		t.Errorf("rejecting history[1] of a %d-byte document allocated %d bytes; it should stop at the bad item", len(doc), n)
	}
	if err == nil {
		t.Fatal("accepted")
	}
}

// BenchmarkUnmarshal reports bytes allocated per byte decoded
// (x-alloc) for each document shape.
func BenchmarkUnmarshal(b *testing.B) {
	docs := []struct {
		name string
		doc  []byte
	}{
		{"history-4MiB", historyEnvelope(4 << 20)},
		{"history-16MiB", historyEnvelope(MaxBytes - 1024)},
		{"payload-1MiB", payloadEnvelope()},
		{"short-attempts-4MiB", shortAttemptsEnvelope(4 << 20)},
	}
	for _, d := range docs {
		b.Run(d.name, func(b *testing.B) {
			b.SetBytes(int64(len(d.doc)))
			b.ReportAllocs()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for b.Loop() {
				if _, err := Unmarshal(d.doc); err != nil {
					b.Fatal(err)
				}
			}
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/float64(len(d.doc)), "x-alloc")
		})
	}
}

// TestUnmarshalEnvelopeDuplicateKeys checks that a repeated key is rejected
// in every object, whatever the key and however many keys come before it.
func TestUnmarshalEnvelopeDuplicateKeys(t *testing.T) {
	manyUnknown := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, `,"x%d":%d`, i, i)
		}
		return b.String()
	}
	cases := []struct{ name, doc, want string }{
		{"unknown key", `{"version":1,"queue":"q","handler":"h","x":1,"x":2}`, `key "x" appears twice in the envelope`},
		{"unknown key after many", `{"version":1,"queue":"q","handler":"h"` + manyUnknown(100) + `,"x57":0}`, `key "x57" appears twice in the envelope`},
		{"known key after many", `{"version":1,"queue":"q","handler":"h"` + manyUnknown(40) + `,"handler":"g"}`, `key "handler" appears twice in the envelope`},
		{"version", `{"version":1,"queue":"q","handler":"h","version":1}`, `key "version" appears twice`},
		{"last_error", `{"version":1,"queue":"q","handler":"h","last_error":{"type":"a","type":"b"}}`, `key "type" appears twice in last_error`},
		{"second attempt", `{"version":1,"queue":"q","handler":"h","history":[{"number":1,"outcome":"SUCCESS"},{"number":2,"number":3,"outcome":"SUCCESS"}]}`, `key "number" appears twice in history[1]`},
		{"escaped header name", `{"version":1,"queue":"q","handler":"h","headers":{"a/b":"1","a\/b":"2"}}`, `key "a/b" appears twice in headers`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { assertInvalid(t, []byte(c.doc), c.want) })
	}
	// The same keys in different objects are not duplicates.
	if _, err := Unmarshal([]byte(`{"version":1,"queue":"q","handler":"h","x":{"x":{"x":1}},` +
		`"history":[{"number":1,"outcome":"SUCCESS"},{"number":2,"outcome":"SUCCESS"}]}`)); err != nil {
		t.Fatal(err)
	}
}

// TestUnmarshalEnvelopeStrings checks that escapes decode exactly as
// encoding/json decodes them, surrogates included.
func TestUnmarshalEnvelopeStrings(t *testing.T) {
	for _, s := range []string{
		`plain`, `quote \" backslash \\ slash \/`, `\b\f\n\r\t`, `\u00e9t\u00C9`, `\ud83d\ude00 pair`,
		`\ud83d lone high`, `\ude00 lone low`, `\ud83d\u0041 high then letter`, `\ud83d\ud83d\ude00 high then pair`,
		`\u0000 nul`, `mixed é and \u00e9`, ``,
	} {
		var want string
		if err := json.Unmarshal([]byte(`"`+s+`"`), &want); err != nil {
			t.Fatalf("encoding/json rejects %q: %v", s, err)
		}
		e, err := Unmarshal([]byte(`{"version":1,"queue":"q","handler":"h","lease_owner":"` + s + `"}`))
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if e.Task.LeaseOwner != want {
			t.Errorf("%q decoded to %q, encoding/json gives %q", s, e.Task.LeaseOwner, want)
		}
	}
	t.Run("payload with escaped slash", func(t *testing.T) {
		e, err := Unmarshal([]byte(`{"version":1,"queue":"q","handler":"h","payload":"\/\/8="}`))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(e.Task.Payload, []byte{0xff, 0xff}) {
			t.Fatalf("payload = %x", e.Task.Payload)
		}
	})
}

// TestUnmarshalEnvelopeSyntax checks that documents encoding/json rejects
// are rejected, with its description of the error.
func TestUnmarshalEnvelopeSyntax(t *testing.T) {
	for _, doc := range []string{
		`{"version":1,"queue":"q","handler":"h",}`,
		`{"version":1,"queue":"q","handler":"h","x":[1,]}`,
		`{"version":1,"queue":"q","handler":"h","x":01}`,
		`{"version":1,"queue":"q","handler":"h","x":-}`,
		`{"version":1,"queue":"q","handler":"h","x":1.}`,
		`{"version":1,"queue":"q","handler":"h","x":1e}`,
		`{"version":1,"queue":"q","handler":"h","x":tru}`,
		`{"version":1,"queue":"q","handler":"h","x":"a` + "\n" + `"}`,
		`{"version":1,"queue":"q","handler":"h","x":"\x"}`,
		`{"version":1,"queue":"q","handler":"h","x":"\u12G4"}`,
		`{"version":1,"queue":"q","handler":"h","x":{"a" 1}}`,
		`{"version":1,"queue":"q","handler":"h","x":{1:1}}`,
		`{"version":1,"queue":"q","handler":"h","x":[}`,
		`{"version":1,"queue":"q","handler":"h" "x":1}`,
		`{"version":1,"queue":"q","handler":"h"`,
		`{"version":1,"queue":"q","handler":"h"}]`,
		`{"version":1,"queue":"q","handler":"h","history":[{"number":1,"outcome":"SUCCESS"}}`,
		`   `,
		`[1,2`,
	} {
		if json.Valid([]byte(doc)) {
			t.Fatalf("test case is valid JSON: %s", doc)
		}
		assertInvalid(t, []byte(doc), "not valid JSON")
	}
}

// TestUnmarshalEnvelopeDeepNesting checks that an unknown field nested far
// beyond any real document is rejected without exhausting the stack, and
// that moderate nesting is skipped.
func TestUnmarshalEnvelopeDeepNesting(t *testing.T) {
	nested := func(depth int) []byte {
		return []byte(`{"version":1,"queue":"q","handler":"h","x":` + strings.Repeat(`[{"a":`, depth) + `1` + strings.Repeat(`}]`, depth) + `}`)
	}
	if _, err := Unmarshal(nested(maxSkipDepth/2 - 1)); err != nil {
		t.Fatalf("nesting %d deep: %v", maxSkipDepth-2, err)
	}
	assertInvalid(t, nested(1_000_000), "more than 10000 deep")
}
