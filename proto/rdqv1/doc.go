// Package rdqv1 holds the Go code generated from rdq's network contract,
// proto/rdq/v1/rdq.proto and proto/rdq/v1/handler.proto: the request and
// response messages and the gRPC client and server stubs of RdqService and
// HandlerService. Package server implements RdqService; a Go client of an
// rdq server uses NewRdqServiceClient. A remote handler implements
// HandlerService, which a worker calls once per attempt.
//
// The generated files are committed, and TestGeneratedCodeIsCurrent fails
// when they differ from what the .proto files generate. They are made by
// buf (https://buf.build) and the protoc-gen-go, protoc-gen-go-grpc and
// protoc-gen-connect-go plugins (the last into package rdqv1connect), all
// pinned and run with go run (proto/buf.gen.yaml), so
// regenerating them after a change needs nothing installed but Go and,
// for the googleapis protos of the REST annotations (fetched once by
// proto/fetch-googleapis.sh from PyPI, pinned by version and checksum),
// Python's pip:
//
//	go generate ./proto/rdqv1
package rdqv1

//go:generate sh ../fetch-googleapis.sh
//go:generate env GOWORK=off go run github.com/bufbuild/buf/cmd/buf@v1.75.0 generate --template ../buf.gen.yaml --path ../rdq -o ../.. ..
