package storeurl

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

func TestScrub(t *testing.T) {
	const raw = "postgres://app:pa55word@db/rdq?sslpassword=key%2Fphrase&api_token=tok-123&sslmode=require&x=ab"
	inner := fmt.Errorf("dial: user app, password pa55word, key key/phrase (key%%2Fphrase), token tok-123, mode require, ab: %w", fs.ErrPermission)
	err := scrub(inner, raw)
	want := "dial: user app, password xxxxx, key xxxxx (xxxxx), token xxxxx, mode require, ab: permission denied"
	if err.Error() != want {
		t.Errorf("scrubbed message\n%q, want\n%q", err.Error(), want)
	}
	if !errors.Is(err, fs.ErrPermission) {
		t.Error("scrubbing lost the error chain")
	}
	clean := errors.New("nothing secret")
	if scrub(clean, raw) != clean {
		t.Error("an error without secrets was replaced")
	}
	if scrub(nil, raw) != nil {
		t.Error("scrub(nil) is not nil")
	}
}
