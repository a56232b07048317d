// Package tools pins the development tools of the repository, as tool
// directives of a module of their own, so that no module a user imports
// requires them. make builds them into .bin:
//
//	cd internal/tools && GOWORK=off go build -o ../../.bin/ honnef.co/go/tools/cmd/staticcheck
package tools
