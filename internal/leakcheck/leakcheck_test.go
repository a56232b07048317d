package leakcheck

import (
	"strings"
	"sync"
	"testing"
)

func TestMain(m *testing.M) { Main(m) }

func TestFindReportsARunningGoroutine(t *testing.T) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-stop
	}()
	defer func() {
		close(stop)
		wg.Wait()
	}()
	leaked := running()
	if len(leaked) != 1 || !strings.Contains(leaked[0], "TestFindReportsARunningGoroutine.func1") {
		t.Fatalf("running() = %q, want the one parked goroutine", leaked)
	}
}

func TestFindIsQuietWhenGoroutinesExit(t *testing.T) {
	done := make(chan struct{})
	go func() { close(done) }()
	<-done
	if err := Find(); err != nil {
		t.Fatalf("Find() = %v, want nil once the goroutine has exited", err)
	}
}

func TestSubtestsAreNotLeaks(t *testing.T) {
	t.Run("parallel", func(t *testing.T) {
		t.Parallel()
		if l := running(); len(l) != 0 {
			t.Errorf("running() inside a parallel subtest = %q, want none", l)
		}
	})
}
