package rdq

import (
	"fmt"
	"testing"
)

// BenchmarkFingerprint measures the default fingerprint of a failure: the
// same message again and again (an outage; the cache answers), and a
// different message every time (ids of many shapes; every call
// normalises).
//
//	go test -run '^$' -bench Fingerprint -count 5 .
func BenchmarkFingerprint(b *testing.B) {
	const same = "POST https://api.example.com/v1/charges: dial tcp 10.0.0.7:443: connect: connection refused"
	b.Run("repeated", func(b *testing.B) {
		for b.Loop() {
			Fingerprint("*net.OpError", same)
		}
	})
	msgs := make([]string, 4096)
	for i := range msgs {
		msgs[i] = fmt.Sprintf("charge ch_3Nf%07dDeFgHiJk for order ord%s (pod api-7d9f8b6c4-%05d, request %08x): status 503 Service Unavailable",
			i, []byte{byte('a' + i%26), byte('a' + i/26%26), 'q', 'w', 'x', 'z', 'k'}, i, i*2654435761)
	}
	b.Run("distinct", func(b *testing.B) {
		i := 0
		for b.Loop() {
			Fingerprint("*api.Error", msgs[i%len(msgs)])
			i++
		}
	})
}
