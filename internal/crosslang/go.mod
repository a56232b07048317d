module github.com/srjn45/rdq/internal/crosslang

go 1.25.0

require (
	github.com/srjn45/rdq v0.0.0
	github.com/srjn45/rdq/callback v0.0.0
	go.opentelemetry.io/otel v1.43.0
	go.opentelemetry.io/otel/sdk v1.38.0
	go.opentelemetry.io/otel/trace v1.43.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/pgx/v5 v5.13.0 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_golang v1.23.2 // indirect
	github.com/prometheus/client_model v0.6.2 // indirect
	github.com/prometheus/common v0.66.1 // indirect
	github.com/prometheus/procfs v0.16.1 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel/metric v1.43.0 // indirect
	go.yaml.in/yaml/v2 v2.4.2 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
	golang.org/x/text v0.41.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace (
	github.com/srjn45/rdq => ../..
	github.com/srjn45/rdq/callback => ../../callback
	github.com/srjn45/rdq/cmd/rdq => ../../cmd/rdq
	github.com/srjn45/rdq/console => ../../console
	github.com/srjn45/rdq/examples => ../../examples
	github.com/srjn45/rdq/pgstore/internal/compliance => ../../pgstore/internal/compliance
	github.com/srjn45/rdq/proto => ../../proto
	github.com/srjn45/rdq/rdqtest => ../../rdqtest
	github.com/srjn45/rdq/redisstore => ../../redisstore
	github.com/srjn45/rdq/server => ../../server
	github.com/srjn45/rdq/sqlitestore => ../../sqlitestore
	github.com/srjn45/rdq/storetest => ../../storetest
	github.com/srjn45/rdq/storeurl => ../../storeurl
)
