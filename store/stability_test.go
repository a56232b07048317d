package store_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/srjn45/rdq/store"
)

// TestStoreMethodsFrozen keeps the stability promise of the package doc:
// store.Store never gains (or loses) a method. A new capability is a new
// optional interface, found with its accessor.
func TestStoreMethodsFrozen(t *testing.T) {
	frozen := []string{"Claim", "Enqueue", "Finish", "Get", "Heartbeat", "PurgeSucceeded", "ReclaimExpired", "Release"}
	typ := reflect.TypeFor[store.Store]()
	var got []string
	for i := range typ.NumMethod() {
		got = append(got, typ.Method(i).Name)
	}
	if !slices.Equal(got, frozen) {
		t.Errorf("store.Store has methods %v; it is frozen at %v. Add a capability as a new interface instead (see the package doc)", got, frozen)
	}
	if _, ok := reflect.TypeFor[store.Admin]().MethodByName("Redrive"); !ok {
		t.Error("store.Admin lacks Redrive")
	}
}
