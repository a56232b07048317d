module github.com/srjn45/rdq/proto

go 1.25.0

require (
	connectrpc.com/connect v1.19.1
	go.uber.org/goleak v1.3.0
	google.golang.org/genproto/googleapis/api v0.0.0-20260414002931-afd174a4e478
	google.golang.org/grpc v1.82.0
	google.golang.org/protobuf v1.36.12
)

require (
	golang.org/x/net v0.53.0 // indirect
	golang.org/x/sys v0.43.0 // indirect
	golang.org/x/text v0.36.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260414002931-afd174a4e478 // indirect
)

replace (
	github.com/srjn45/rdq => ..
	github.com/srjn45/rdq/callback => ../callback
	github.com/srjn45/rdq/cmd/rdq => ../cmd/rdq
	github.com/srjn45/rdq/console => ../console
	github.com/srjn45/rdq/examples => ../examples
	github.com/srjn45/rdq/internal/crosslang => ../internal/crosslang
	github.com/srjn45/rdq/pgstore/internal/compliance => ../pgstore/internal/compliance
	github.com/srjn45/rdq/rdqtest => ../rdqtest
	github.com/srjn45/rdq/redisstore => ../redisstore
	github.com/srjn45/rdq/server => ../server
	github.com/srjn45/rdq/sqlitestore => ../sqlitestore
	github.com/srjn45/rdq/storetest => ../storetest
	github.com/srjn45/rdq/storeurl => ../storeurl
)
