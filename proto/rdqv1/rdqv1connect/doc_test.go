package rdqv1connect_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/srjn45/rdq/proto/rdqv1"
	"github.com/srjn45/rdq/proto/rdqv1/rdqv1connect"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The Connect handlers serve the paths of the gRPC services they mirror.
func TestServiceNames(t *testing.T) {
	if rdqv1connect.RdqServiceName != rdqv1.RdqService_ServiceDesc.ServiceName {
		t.Errorf("RdqServiceName = %q, want %q", rdqv1connect.RdqServiceName, rdqv1.RdqService_ServiceDesc.ServiceName)
	}
	if rdqv1connect.HandlerServiceName != rdqv1.HandlerService_ServiceDesc.ServiceName {
		t.Errorf("HandlerServiceName = %q, want %q", rdqv1connect.HandlerServiceName, rdqv1.HandlerService_ServiceDesc.ServiceName)
	}
	if rdqv1connect.RdqServiceSubmitProcedure != "/"+rdqv1.RdqService_ServiceDesc.ServiceName+"/Submit" {
		t.Errorf("RdqServiceSubmitProcedure = %q", rdqv1connect.RdqServiceSubmitProcedure)
	}
}
