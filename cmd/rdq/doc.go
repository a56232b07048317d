// Command rdq operates rdq's queues and dead-letter queue from a terminal or a
// script: migrate the schema, read queue stats, browse, group, redrive and
// purge dead tasks, list, retry and cancel live tasks, pause and resume
// queues, list the registered workers and the tasks none of them can run,
// serve the console, and read the audit log of who changed what.
//
//	rdq [global flags] <command> [flags] [arguments]
//
// The database is --database-url, else $RDQ_DATABASE_URL: postgres://… for
// PostgreSQL (with --schema, $RDQ_SCHEMA or the URL's schema parameter
// naming the schema, default rdq), sqlite:PATH for a SQLite file, and with
// neither the per-user SQLite file (~/.local/share/rdq/rdq.db). Only 'rdq
// migrate' creates or upgrades tables. Every command prints a readable
// table, or JSON with stable snake_case field names under --json. Run 'rdq
// help' for every command and flag.
//
// # When something lands in the DLQ
//
// Start with the size of the problem, then group it: one bug's ten thousand
// victims are one line, keyed by a fingerprint of the error type and the
// message with ids and numbers stripped.
//
//	rdq stats
//	rdq dlq groups --queue emails --since 2h
//
// Look at a few victims and at one in full: every attempt across its lives,
// with worker, times and stack trace.
//
//	rdq dlq ls --fingerprint cf96d798323d5cbf --limit 5
//	rdq dlq show 01954a1e-c000-7000-8000-000000000002
//
// Fix the cause (deploy, config, the downstream service), then check what a
// redrive would touch, and redrive the group, spread over ten minutes so the
// fix does not meet a thundering herd. On a terminal rdq asks before a bulk
// change; scripts pass --yes.
//
//	rdq dlq redrive --fingerprint cf96d798323d5cbf --dry-run
//	rdq dlq redrive --fingerprint cf96d798323d5cbf --spread 10m --reason "relay fixed, INC-7"
//
// A task whose payload is wrong can be fixed and redriven alone; the audit
// log keeps the SHA-256 of the old and the new payload.
//
//	rdq dlq show 01954a1e-c000-7000-8000-000000000005 --payload > task.json
//	$EDITOR task.json
//	rdq dlq redrive 01954a1e-c000-7000-8000-000000000005 --payload-file task.json --reason "bad sign, TICKET-12"
//
// What cannot be saved is purged, by id, filter or fingerprint; and the audit
// log shows afterwards who did what, when and why.
//
//	rdq dlq purge --handler send_receipt --reason "receipts resent by hand" --yes
//	rdq audit ls --since 1d
//
// The same, in a browser, on the same database: 'rdq console' serves the
// DLQ console on 127.0.0.1:8080 for the local user.
//
// --max-life N on redrive leaves tasks that were already redriven N times
// dead (and says how many), so a poison task cannot loop forever.
//
// # Exit codes
//
//	0  success (dry runs, and selections that match nothing, included)
//	1  runtime error: database unreachable, a query failed, aborted at the prompt
//	2  usage error: bad command, flag or argument, or a bulk change needs --yes
//	3  not found: a task named by id does not exist
//	4  conflict: a task named by id is not dead, or reached its redrive limit
package main
