package storeopen_test

import (
	"fmt"

	"github.com/srjn45/rdq/internal/storeopen"
)

func ExampleDescribe() {
	fmt.Println(storeopen.Describe("postgres://app:secret@db.internal:5432/jobs?schema=rdq"))
	fmt.Println(storeopen.Describe("sqlite:/var/lib/app/rdq.db"))
	// Output:
	// PostgreSQL at postgres://app:xxxxx@db.internal:5432/jobs (schema rdq)
	// SQLite at /var/lib/app/rdq.db
}
