package dlq_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/dlq"
)

// Triage: group the dead tasks of a queue by failure, then redrive one
// group after fixing its cause, spread over ten minutes.
func Example() {
	ctx := context.Background()
	pg := exampleStore() // a *pgstore.Store on your database

	q, err := dlq.New(pg, dlq.Config{})
	if err != nil {
		panic(err)
	}
	groups, err := q.Groups(ctx, dlq.Filter{Queue: "emails"})
	if err != nil {
		panic(err)
	}
	for _, g := range groups {
		fmt.Printf("%d × %s: %s\n", g.Count, g.ErrorType, g.Message)
	}

	res, err := q.Redrive(ctx, dlq.Filter{Fingerprint: groups[0].Fingerprint}, dlq.RedriveOptions{
		Actor:  "alice",
		Reason: "SMTP relay firewall rule restored (INC-1234)",
		Spread: 10 * time.Minute,
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("redrove %d of %d\n", res.Redriven, res.Matched)
	// Output:
	// 2 × *net.OpError: dial tcp 10.0.0.9:25: connection refused
	// 1 × timeout: handler timed out after 30s
	// redrove 2 of 2
}

// Page through dead tasks with the opaque, URL-safe page token.
func ExampleDLQ_List() {
	ctx := context.Background()
	q, err := dlq.New(exampleStore(), dlq.Config{})
	if err != nil {
		panic(err)
	}
	f := dlq.Filter{Queue: "emails", ErrorType: "timeout"}
	opts := dlq.ListOptions{PageSize: 100}
	for {
		page, err := q.List(ctx, f, opts)
		if err != nil {
			panic(err)
		}
		for _, t := range page.Tasks {
			fmt.Println(t.Handler, t.LastError.Message)
		}
		if page.NextPageToken == "" {
			break
		}
		opts.PageToken = page.NextPageToken
	}
	// Output:
	// send_receipt handler timed out after 30s
}

// A dry run says what a bulk change would touch and changes nothing.
func ExampleDLQ_Purge() {
	ctx := context.Background()
	q, err := dlq.New(exampleStore(), dlq.Config{})
	if err != nil {
		panic(err)
	}
	res, err := q.Purge(ctx, dlq.Filter{Handler: "send_receipt"}, dlq.PurgeOptions{DryRun: true})
	if err != nil {
		panic(err)
	}
	fmt.Printf("would delete %d\n", res.Purged)

	_, err = q.Purge(ctx, dlq.Filter{}, dlq.PurgeOptions{Actor: "alice", Reason: "cleanup"})
	fmt.Println(errors.Is(err, dlq.ErrAllRequired))
	// Output:
	// would delete 1
	// true
}

// Filters are validated at the edge with errors that say what is wrong.
func ExampleFilter_Validate() {
	err := dlq.Filter{Queue: "emails", Fingerprint: "not-hex"}.Validate()
	fmt.Println(errors.Is(err, rdq.ErrInvalid))
	fmt.Println(err)
	// Output:
	// true
	// rdq: invalid input: filter: fingerprint "not-hex" is not hexadecimal (copy it from the groups view)
}

func ExampleFilter_String() {
	f := dlq.Filter{Queue: "emails", ErrorType: "timeout", MessageContains: "after 30s"}
	fmt.Println(f)
	fmt.Println(dlq.Filter{})
	// Redrive loops: tasks that died again after at least two redrives,
	// and tasks in exactly their second life.
	fmt.Println(dlq.Filter{Queue: "emails", LifeMin: 2})
	fmt.Println(dlq.Filter{LifeMin: 1, LifeBelow: 2})
	// Output:
	// queue=emails error_type=timeout message="after 30s"
	// all dead tasks
	// queue=emails life>=2
	// life=1
}
