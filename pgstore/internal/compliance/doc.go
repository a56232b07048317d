// Package compliance runs the store compliance kit (storetest) on pgstore.
//
// It is a module of its own so that pgstore's module, which is rdq's core,
// does not require the kit and what the kit needs (rapid, goleak, the
// SQLite store of its self-test): a module's test dependencies are listed
// in its go.mod and so reach every user's module graph.
package compliance
