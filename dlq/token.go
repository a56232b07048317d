package dlq

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

// A page token is the keyset cursor of the last task on a page, bound to the
// filter it was issued for, as unpadded base64url (URL-safe, no escaping
// needed in a query string or a shell):
//
//	version (1 byte) | dead time, Unix nanoseconds (8) | task id (16) | filter digest (8)
const (
	tokenVersion = 1
	tokenLen     = 1 + 8 + 16 + 8
)

func encodeToken(c store.Cursor, f Filter) string {
	var b [tokenLen]byte
	b[0] = tokenVersion
	binary.BigEndian.PutUint64(b[1:9], uint64(c.FinishedAt.UnixNano()))
	copy(b[9:25], c.ID[:])
	binary.BigEndian.PutUint64(b[25:33], f.digest())
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func decodeToken(s string, f Filter) (store.Cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != tokenLen || b[0] != tokenVersion {
		return store.Cursor{}, fmt.Errorf("%w: page token %q is not one this version issued: pass the next-page token of a listing unchanged, or start again without one", rdq.ErrInvalid, clip(s))
	}
	if binary.BigEndian.Uint64(b[25:33]) != f.digest() {
		return store.Cursor{}, fmt.Errorf("%w: page token was issued for a different filter: repeat the listing's filter, or start again without a token", rdq.ErrInvalid)
	}
	var c store.Cursor
	c.FinishedAt = time.Unix(0, int64(binary.BigEndian.Uint64(b[1:9]))).UTC()
	copy(c.ID[:], b[9:25])
	if c.ID.IsZero() {
		return store.Cursor{}, fmt.Errorf("%w: page token holds no task id: start again without a token", rdq.ErrInvalid)
	}
	return c, nil
}
