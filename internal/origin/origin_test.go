package origin

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/srjn45/rdq/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// An Origin naming the listener's host under the other scheme is refused;
// the same origin, a trusted one and safe methods pass.
func TestProtectRefusesAnotherScheme(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	h, err := Protect(ok, []string{"https://rdq.example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, method, host, origin, fetchSite string
		tls                                   bool
		want                                  int
	}{
		{"https origin on the http listener", "POST", "127.0.0.1:8080", "https://127.0.0.1:8080", "", false, 403},
		{"http origin on the https listener", "POST", "127.0.0.1:8443", "http://127.0.0.1:8443", "", true, 403},
		{"same origin, http", "POST", "127.0.0.1:8080", "http://127.0.0.1:8080", "", false, 204},
		{"same origin, https", "POST", "127.0.0.1:8443", "https://127.0.0.1:8443", "", true, 204},
		{"another host", "POST", "127.0.0.1:8080", "http://evil.example", "", false, 403},
		{"trusted public origin behind a proxy", "POST", "rdq.example.com", "https://rdq.example.com", "", false, 204},
		{"no origin", "POST", "127.0.0.1:8080", "", "", false, 204},
		{"a GET from another scheme", "GET", "127.0.0.1:8080", "https://127.0.0.1:8080", "", false, 204},
		{"browser says same-origin", "POST", "rdq.example.com", "https://rdq.example.com", "same-origin", false, 204},
		{"browser says cross-site", "POST", "127.0.0.1:8080", "https://127.0.0.1:8080", "cross-site", false, 403},
	}
	for _, tc := range cases {
		r := httptest.NewRequest(tc.method, "http://"+tc.host+"/x", nil)
		r.Host = tc.host
		if tc.tls {
			r.TLS = &tls.ConnectionState{}
		}
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		if tc.fetchSite != "" {
			r.Header.Set("Sec-Fetch-Site", tc.fetchSite)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, w.Code, tc.want)
		}
	}
	if _, err := Protect(ok, []string{"rdq.example.com"}, nil); err == nil {
		t.Error("a trusted origin without a scheme was accepted")
	}
}
