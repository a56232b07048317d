package rdq

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestValidateName(t *testing.T) {
	good := []string{
		"a", "Z", "7", "emails", "send_welcome", "billing/charges", "charge.card:v2",
		"queue-1", "A.b_c-d:e/f", strings.Repeat("n", MaxNameLength),
	}
	for _, name := range good {
		if err := ValidateName("queue", name); err != nil {
			t.Errorf("ValidateName(%q) = %v", name, err)
		}
	}
	bad := []struct{ name, want string }{
		{"", "queue name is empty"},
		{strings.Repeat("n", MaxNameLength+1), "queue name is 129 bytes; the limit is 128"},
		{".hidden", "must start with a letter or digit"},
		{"_private", "must start with a letter or digit"},
		{"-x", "must start with a letter or digit"},
		{"/abs", "must start with a letter or digit"},
		{"has space", `contains ' '`},
		{"tab\there", `contains '\t'`},
		{"star*", `contains '*'`},
		{"caf\u00e9", "use letters, digits and . _ - : /"},
		{"nul\x00", "use letters, digits and . _ - : /"},
		{"ünicode", "must start with a letter or digit"},
	}
	for _, c := range bad {
		err := ValidateName("queue", c.name)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ValidateName(%q) = %v, want ErrInvalid containing %q", c.name, err, c.want)
		}
	}
	if err := ValidateName("handler", ""); err == nil || !strings.Contains(err.Error(), "handler name") {
		t.Errorf("error does not name the field: %v", err)
	}
	long := "x " + strings.Repeat("y", 1000)
	if err := ValidateName("queue", long[:MaxNameLength]); err == nil || len(err.Error()) > 300 {
		t.Errorf("error for a long bad name is not cut: %v", err)
	}
}

func TestTaskValidate(t *testing.T) {
	valid := func() Task {
		return Task{
			Queue: "emails", Handler: "send", Payload: []byte("{}"), ContentType: "application/json",
			Headers: map[string]string{"traceparent": "00-abc"}, IdempotencyKey: "k1",
		}
	}
	base := valid()
	if err := base.Validate(); err != nil {
		t.Fatalf("valid task: %v", err)
	}
	manyHeaders := func(n int) map[string]string {
		h := make(map[string]string, n)
		for i := range n {
			h[fmt.Sprintf("h%d", i)] = "v"
		}
		return h
	}
	atLimit := []struct {
		name   string
		modify func(*Task)
	}{
		{"payload at the limit", func(t *Task) { t.Payload = make([]byte, MaxPayloadBytes) }},
		{"no payload", func(t *Task) { t.Payload = nil }},
		{"content type at the limit", func(t *Task) { t.ContentType = "text/" + strings.Repeat("c", MaxContentTypeLength-5) }},
		{"content type with parameters", func(t *Task) { t.ContentType = `text/plain; charset="utf-8"` }},
		{"no content type", func(t *Task) { t.ContentType = "" }},
		{"idempotency key at the limit", func(t *Task) { t.IdempotencyKey = strings.Repeat("k", MaxIdempotencyKeyLength) }},
		{"unicode idempotency key", func(t *Task) { t.IdempotencyKey = "commande-n°42-é" }},
		{"headers at the limit", func(t *Task) { t.Headers = manyHeaders(MaxHeaders) }},
		{"header name at the limit", func(t *Task) { t.Headers = map[string]string{strings.Repeat("h", MaxHeaderKeyLength): "v"} }},
		{"header value at the limit", func(t *Task) { t.Headers = map[string]string{"h": strings.Repeat("v", MaxHeaderValueLength)} }},
		{"empty header value", func(t *Task) { t.Headers = map[string]string{"h": ""} }},
	}
	for _, c := range atLimit {
		task := valid()
		c.modify(&task)
		if err := task.Validate(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	over := []struct {
		name   string
		modify func(*Task)
		want   string
	}{
		{"bad queue", func(t *Task) { t.Queue = "a b" }, `queue name "a b"`},
		{"no handler", func(t *Task) { t.Handler = "" }, "handler name is empty"},
		{"payload over", func(t *Task) { t.Payload = make([]byte, MaxPayloadBytes+1) }, "payload is 1048577 bytes; the limit is 1048576"},
		{"content type over", func(t *Task) { t.ContentType = strings.Repeat("c", MaxContentTypeLength+1) }, "content type is 256 bytes; the limit is 255"},
		{"idempotency key over", func(t *Task) { t.IdempotencyKey = strings.Repeat("k", MaxIdempotencyKeyLength+1) }, "idempotency key is 256 bytes; the limit is 255"},
		{"idempotency key not UTF-8", func(t *Task) { t.IdempotencyKey = "k\xff" }, "idempotency key must be UTF-8 text"},
		{"idempotency key with NUL", func(t *Task) { t.IdempotencyKey = "k\x00" }, "without NUL bytes"},
		{"content type with NUL", func(t *Task) { t.ContentType = "text/plain\x00" }, "contains the control character U+0000"},
		{"content type with CR LF", func(t *Task) { t.ContentType = "text/plain\r\nX-Evil: 1" }, "contains the control character U+000D"},
		{"content type with LF in a parameter", func(t *Task) { t.ContentType = "text/plain; a=\"b\nc\"" }, "control character U+000A"},
		{"content type without subtype", func(t *Task) { t.ContentType = "json" }, "is not a media type"},
		{"content type malformed", func(t *Task) { t.ContentType = "text/plain; ;" }, "is not a media type"},
		{"header value with NUL", func(t *Task) { t.Headers = map[string]string{"h": "a\x00b"} }, "without NUL bytes"},
		{"too many headers", func(t *Task) { t.Headers = manyHeaders(MaxHeaders + 1) }, "65 headers; the limit is 64"},
		{"empty header name", func(t *Task) { t.Headers = map[string]string{"": "v"} }, `header name "" must be 1 to 128 bytes`},
		{"header name over", func(t *Task) { t.Headers = map[string]string{strings.Repeat("h", MaxHeaderKeyLength+1): "v"} }, "must be 1 to 128 bytes of UTF-8"},
		{"header name not UTF-8", func(t *Task) { t.Headers = map[string]string{"h\xff": "v"} }, "must be 1 to 128 bytes of UTF-8"},
		{"header value over", func(t *Task) { t.Headers = map[string]string{"h": strings.Repeat("v", MaxHeaderValueLength+1)} }, `header "h" value must be at most 4096 bytes`},
		{"header value not UTF-8", func(t *Task) { t.Headers = map[string]string{"h": "\xc3"} }, `header "h" value must be at most 4096 bytes of UTF-8`},
	}
	for _, c := range over {
		task := valid()
		c.modify(&task)
		err := task.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate = %v, want ErrInvalid containing %q", c.name, err, c.want)
		}
	}
}
