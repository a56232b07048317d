package dlq

import (
	"context"
	"sync"
)

// runChunks spends a budget of total tasks in chunks of at most d.bulk,
// with up to d.parallel chunks in flight, each a call of step (one store
// transaction). It stops when the budget is spent, when a chunk comes back
// short (the selection is exhausted), on the first error, or when ctx is
// done. onChunk sees every chunk's count, serialized. It returns how many
// tasks the chunks changed, and the first error.
func (d *DLQ) runChunks(ctx context.Context, total int64, step func(ctx context.Context, limit int) (int64, error), onChunk func(n int64)) (int64, error) {
	var (
		mu        sync.Mutex
		remaining = total
		done      int64
		exhausted bool
		firstErr  error
		wg        sync.WaitGroup
	)
	work := func() {
		defer wg.Done()
		for {
			mu.Lock()
			if firstErr == nil {
				firstErr = ctx.Err()
			}
			if exhausted || remaining <= 0 || firstErr != nil {
				mu.Unlock()
				return
			}
			limit := min(int64(d.bulk), remaining)
			remaining -= limit
			mu.Unlock()

			n, err := step(ctx, int(limit))

			mu.Lock()
			remaining += limit - n
			done += n
			switch {
			case err != nil:
				if firstErr == nil {
					firstErr = err
				}
			case n < limit:
				exhausted = true
			}
			if n > 0 || err == nil {
				onChunk(n)
			}
			mu.Unlock()
		}
	}
	workers := d.parallel
	if int64(workers) > (total+int64(d.bulk)-1)/int64(d.bulk) {
		workers = int((total + int64(d.bulk) - 1) / int64(d.bulk))
	}
	wg.Add(workers)
	for i := 1; i < workers; i++ {
		go work()
	}
	if workers > 0 {
		work()
	}
	wg.Wait()
	return done, firstErr
}
