//go:build !unix

package workload

import "time"

// processCPU reports zero: the platform's process CPU time is not read.
func processCPU() time.Duration { return 0 }
