module github.com/srjn45/rdq/callback

go 1.25.0

require (
	github.com/srjn45/rdq v0.0.0
	go.opentelemetry.io/otel v1.38.0
	go.uber.org/goleak v1.3.0
)

require go.opentelemetry.io/otel/trace v1.38.0 // indirect

replace (
	github.com/srjn45/rdq => ..
	github.com/srjn45/rdq/cmd/rdq => ../cmd/rdq
	github.com/srjn45/rdq/console => ../console
	github.com/srjn45/rdq/examples => ../examples
	github.com/srjn45/rdq/internal/crosslang => ../internal/crosslang
	github.com/srjn45/rdq/pgstore/internal/compliance => ../pgstore/internal/compliance
	github.com/srjn45/rdq/proto => ../proto
	github.com/srjn45/rdq/rdqtest => ../rdqtest
	github.com/srjn45/rdq/redisstore => ../redisstore
	github.com/srjn45/rdq/server => ../server
	github.com/srjn45/rdq/sqlitestore => ../sqlitestore
	github.com/srjn45/rdq/storetest => ../storetest
	github.com/srjn45/rdq/storeurl => ../storeurl
)
