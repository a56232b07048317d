package dlq

import "github.com/srjn45/rdq/store"

// EncodeToken lets benchmarks start a listing deep inside the DLQ.
func EncodeToken(c store.Cursor, f Filter) string { return encodeToken(c, f) }
