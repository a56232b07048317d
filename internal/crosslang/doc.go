// Package crosslang holds the tests that keep the Java SDK (java/) and the
// Go core in step: the SQL the Java SDK runs is pgstore's, the migrations it
// ships (its own copy and the Flyway scripts) are pgstore's, its known schema
// versions end at pgstore's latest migration, and Go and Java workers and
// clients interoperate on one database (submit on one side, execute,
// dead-letter and redrive on the other, kill Java workers mid-task, run a
// mixed chaos test). It has no non-test code but this comment.
package crosslang
