// Package origin guards browser-facing handlers against cross-origin
// requests.
package origin

import (
	"fmt"
	"net/http"
	"net/url"
)

// Protect returns h behind http.CrossOriginProtection with the trusted
// origins added, which also refuses an unsafe request (not GET, HEAD or
// OPTIONS) without Sec-Fetch-Site whose Origin names the request's host
// under a scheme other than the one the request came in by (https over
// TLS, else http), unless that origin is trusted. deny, if not nil,
// answers refused requests; nil means 403 Forbidden.
func Protect(h http.Handler, trusted []string, deny http.Handler) (http.Handler, error) {
	cop := http.NewCrossOriginProtection()
	trust := make(map[string]bool, len(trusted))
	for _, o := range trusted {
		if err := cop.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("trusted origin %q: %w (use scheme://host[:port], such as https://rdq.example.com)", o, err)
		}
		trust[o] = true
	}
	if deny == nil {
		deny = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "cross-origin request refused", http.StatusForbidden)
		})
	}
	cop.SetDenyHandler(deny)
	inner := cop.Handler(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if otherScheme(r, trust) {
			deny.ServeHTTP(w, r)
			return
		}
		inner.ServeHTTP(w, r)
	}), nil
}

// otherScheme reports whether r is an unsafe request without
// Sec-Fetch-Site from an untrusted Origin that has r's host but another
// scheme than r's.
func otherScheme(r *http.Request, trust map[string]bool) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	if r.Header.Get("Sec-Fetch-Site") != "" {
		return false // a browser compared the whole origin; CrossOriginProtection reads it
	}
	o := r.Header.Get("Origin")
	if o == "" || trust[o] {
		return false
	}
	u, err := url.Parse(o)
	if err != nil || u.Host != r.Host {
		return false // another host: CrossOriginProtection refuses it
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return u.Scheme != scheme
}
