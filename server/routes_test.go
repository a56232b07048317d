package server

import (
	"net/http"
	"testing"
)

// The REST routes are read from rdq.proto's google.api.http annotations.
func TestHTTPRuleFromTheProto(t *testing.T) {
	for rpc, want := range map[string][2]string{
		"Submit":    {http.MethodPost, "/v1/tasks"},
		"GetTask":   {http.MethodGet, "/v1/tasks/{id}"},
		"TaskByKey": {http.MethodGet, "/v1/tasks:by-key"},
	} {
		method, path, err := httpRule(rpc)
		if err != nil || method != want[0] || path != want[1] {
			t.Errorf("httpRule(%s) = %s %s, %v; want %s %s", rpc, method, path, err, want[0], want[1])
		}
	}
	if _, _, err := httpRule("NoSuchMethod"); err == nil {
		t.Error("httpRule of a method the service does not have: no error")
	}
}
