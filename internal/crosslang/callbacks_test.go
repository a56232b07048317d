package crosslang

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/srjn45/rdq/callback"
)

// callbackVectorsFile holds the signed callback requests every receiver
// implementation is checked against (the TypeScript and Python SDKs read
// it); TestCallbackVectors writes it with -update and checks it otherwise.
var callbackVectorsFile = filepath.Join("..", "..", "testdata", "conformance", "callbacks.json")

// callbackVector is one signed callback request: a receiver given Secret
// must accept Body under ID, Timestamp and Signature (at a clock within
// its allowed skew of Timestamp), hand its handler the payload whose
// standard base64 is Payload, and refuse the request once any of ID,
// Timestamp, Body or Signature is changed.
type callbackVector struct {
	Name      string `json:"name"`
	Secret    string `json:"secret"`
	ID        string `json:"id"`
	Timestamp int64  `json:"timestamp"`
	Body      string `json:"body"`
	Signature string `json:"signature"`
	Payload   string `json:"payload"`
}

type callbackVectors struct {
	Comment string           `json:"comment"`
	Vectors []callbackVector `json:"vectors"`
}

// Every vector's signature is callback.Sign's, and its payload is what
// the Go receiver hands its handler; any change to the signed parts
// changes the signature.
func TestCallbackVectors(t *testing.T) {
	const id = "0190f3a0-5e1c-7c2a-9b1e-3d4f5a6b7c8d"
	raw := "a-raw-secret-of-32-bytes-for-rdq"
	whsec := callback.SecretPrefix + base64.StdEncoding.EncodeToString([]byte("another key, given in the whsec_ form"))
	msg := func(data string) string {
		return `{"type":"rdq.task","timestamp":"2024-06-01T12:00:00Z","data":{"id":"` + id + `","queue":"orders","handler":"charge",` + data + `}}`
	}
	want := callbackVectors{
		Comment: "Signed rdq callback requests (Standard Webhooks). Written by go test ./internal/crosslang -run TestCallbackVectors -update; see callbacks_test.go there for the contract.",
	}
	for _, v := range []callbackVector{
		{Name: "JSON payload, raw secret", Secret: raw, Body: msg(`"attempt":1,"life":0,"lease_token":7,"content_type":"application/json","headers":{"tenant":"acme"},"payload":{"order": 42, "note":"<&>"}`), Payload: `{"order": 42, "note":"<&>"}`},
		{Name: "binary payload, whsec secret", Secret: whsec, Body: msg(`"attempt":3,"life":1,"lease_token":12,"content_type":"application/octet-stream","payload_base64":"AAEC/w=="`), Payload: "\x00\x01\x02\xff"},
		{Name: "a header and a nested member named payload", Secret: raw, Body: msg(`"attempt":2,"life":0,"lease_token":9,"content_type":"application/json","headers":{"payload":"x"},"payload":{"payload":[1,{"payload":"}"}],"n":1e2}`), Payload: `{"payload":[1,{"payload":"}"}],"n":1e2}`},
		{Name: "no payload", Secret: whsec, Body: msg(`"attempt":1,"life":0,"lease_token":1`), Payload: ""},
	} {
		v.ID = id
		v.Timestamp = 1717243200
		v.Signature = callback.Sign([]byte(v.Secret), v.ID, v.Timestamp, []byte(v.Body))
		v.Payload = base64.StdEncoding.EncodeToString([]byte(v.Payload))
		var m callback.Message
		if err := json.Unmarshal([]byte(v.Body), &m); err != nil {
			t.Fatalf("%s: the body is not a callback message: %v", v.Name, err)
		}
		if got := base64.StdEncoding.EncodeToString(m.Data.Body()); got != v.Payload {
			t.Errorf("%s: Go reads payload %q, the vector says %q", v.Name, got, v.Payload)
		}
		for what, changed := range map[string]string{
			"id":        callback.Sign([]byte(v.Secret), v.ID+"0", v.Timestamp, []byte(v.Body)),
			"timestamp": callback.Sign([]byte(v.Secret), v.ID, v.Timestamp+1, []byte(v.Body)),
			"body":      callback.Sign([]byte(v.Secret), v.ID, v.Timestamp, []byte(v.Body+" ")),
			"secret":    callback.Sign([]byte(v.Secret+"x"), v.ID, v.Timestamp, []byte(v.Body)),
		} {
			if changed == v.Signature {
				t.Errorf("%s: changing the %s leaves the signature as it was", v.Name, what)
			}
		}
		want.Vectors = append(want.Vectors, v)
	}
	b, err := json.MarshalIndent(want, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	if *update {
		if err := os.WriteFile(callbackVectorsFile, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(callbackVectorsFile)
	if err != nil {
		t.Fatalf("%v; write it with go test ./internal/crosslang -run TestCallbackVectors -update", err)
	}
	if !bytes.Equal(got, b) {
		t.Errorf("%s is not what Go signs; rewrite it with go test ./internal/crosslang -run TestCallbackVectors -update and review the diff", callbackVectorsFile)
	}
}
