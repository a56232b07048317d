// Package rdqv1 holds the Go code generated from rdq's network contract,
// proto/rdq/v1/rdq.proto: the request and response messages and the gRPC
// client and server stubs of RdqService. Package server implements the
// service; a Go client of an rdq server uses NewRdqServiceClient.
//
// The generated files are committed. To regenerate them after changing the
// .proto file, install protoc and the two plugins, then run go generate:
//
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.11
//	go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.1
//	go generate ./proto/rdqv1
package rdqv1

//go:generate protoc -I ../ --go_out=../.. --go_opt=module=github.com/srjn45/rdq --go-grpc_out=../.. --go-grpc_opt=module=github.com/srjn45/rdq rdq/v1/rdq.proto
