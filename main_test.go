package rdq

import (
	"testing"

	"github.com/srjn45/rdq/internal/leakcheck"
)

func TestMain(m *testing.M) {
	leakcheck.Main(m)
}
