module github.com/srjn45/rdq/server

go 1.25.0

require (
	connectrpc.com/connect v1.19.1
	github.com/prometheus/client_golang v1.23.2
	github.com/prometheus/client_model v0.6.2
	github.com/prometheus/common v0.66.1
	github.com/srjn45/rdq v0.0.0
	github.com/srjn45/rdq/callback v0.0.0-00010101000000-000000000000
	github.com/srjn45/rdq/console v0.0.0-00010101000000-000000000000
	github.com/srjn45/rdq/proto v0.0.0-00010101000000-000000000000
	github.com/srjn45/rdq/sqlitestore v0.0.0-00010101000000-000000000000
	go.opentelemetry.io/otel v1.45.0
	go.opentelemetry.io/otel/trace v1.45.0
	go.uber.org/goleak v1.3.0
	google.golang.org/genproto/googleapis/api v0.0.0-20260414002931-afd174a4e478
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260414002931-afd174a4e478
	google.golang.org/grpc v1.82.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dustin/go-humanize v1.0.1 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/pgx/v5 v5.13.0 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/mattn/go-isatty v0.0.24 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/ncruces/go-strftime v1.0.0 // indirect
	github.com/prometheus/procfs v0.16.1 // indirect
	github.com/remyoudompheng/bigfft v0.0.0-20230129092748-24d4a6f8daec // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel/metric v1.45.0 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	golang.org/x/net v0.53.0 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	modernc.org/libc v1.75.7 // indirect
	modernc.org/mathutil v1.7.1 // indirect
	modernc.org/memory v1.12.1 // indirect
	modernc.org/sqlite v1.59.0 // indirect
)

replace (
	github.com/srjn45/rdq => ..
	github.com/srjn45/rdq/callback => ../callback
	github.com/srjn45/rdq/cmd/rdq => ../cmd/rdq
	github.com/srjn45/rdq/console => ../console
	github.com/srjn45/rdq/examples => ../examples
	github.com/srjn45/rdq/internal/crosslang => ../internal/crosslang
	github.com/srjn45/rdq/pgstore/internal/compliance => ../pgstore/internal/compliance
	github.com/srjn45/rdq/proto => ../proto
	github.com/srjn45/rdq/rdqtest => ../rdqtest
	github.com/srjn45/rdq/redisstore => ../redisstore
	github.com/srjn45/rdq/sqlitestore => ../sqlitestore
	github.com/srjn45/rdq/storetest => ../storetest
	github.com/srjn45/rdq/storeurl => ../storeurl
)
