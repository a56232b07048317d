// Package rdqv1 holds the Go code generated from rdq's network contract,
// proto/rdq/v1/rdq.proto and proto/rdq/v1/handler.proto: the request and
// response messages and the gRPC client and server stubs of RdqService and
// HandlerService. Package server implements RdqService; a Go client of an
// rdq server uses NewRdqServiceClient. A remote handler implements
// HandlerService, which a worker calls once per attempt.
//
// The generated files are committed, and TestGeneratedCodeIsCurrent fails
// when they differ from what the .proto files generate. To regenerate them
// after changing it, install protoc and the two plugins at their pinned
// versions (scripts/protoc.sh), then run go generate:
//
//	bash scripts/protoc.sh
//	PATH="$(go env GOPATH)/bin:$PATH" go generate ./proto/rdqv1
package rdqv1

//go:generate protoc -I ../ --go_out=../.. --go_opt=module=github.com/srjn45/rdq --go-grpc_out=../.. --go-grpc_opt=module=github.com/srjn45/rdq rdq/v1/rdq.proto rdq/v1/handler.proto
