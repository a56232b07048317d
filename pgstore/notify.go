package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/jackc/pgx/v5/pgxpool"
)

// notificationBuffer is how many hints Notifications holds for a slow
// reader before it drops new ones (polling covers dropped hints).
const notificationBuffer = 64

// Notifications delivers the names of queues in which tasks may have become
// due: enqueues of tasks due at once, retries and redrives due at once, and
// releases. It holds one connection of the pool for as long as ctx lives,
// listening on the store's channel (see Channel).
//
// The first connection is made before Notifications returns; its failure is
// the error. When the connection is lost later, it reconnects with
// exponential backoff, logging each failure; notifications sent while it
// was disconnected are lost, which polling makes up for. Hints are dropped
// when the reader falls more than a small buffer behind. When ctx is done
// the channel is closed and the connection closed, which frees its place in
// the pool.
func (s *Store) Notifications(ctx context.Context) (<-chan string, error) {
	conn, err := s.listen(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: listening for notifications: %w", err)
	}
	ch := make(chan string, notificationBuffer)
	go s.notifyLoop(ctx, conn, ch)
	return ch, nil
}

// listen acquires a connection and subscribes it to the store's channel.
func (s *Store) listen(ctx context.Context) (*pgxpool.Conn, error) {
	conn, err := s.listenPool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, s.q.listen); err != nil {
		s.dropConn(conn)
		return nil, err
	}
	return conn, nil
}

// notifyLoop forwards notifications until ctx is done, reconnecting when
// the connection fails.
func (s *Store) notifyLoop(ctx context.Context, conn *pgxpool.Conn, ch chan<- string) {
	defer close(ch)
	// One backoff for the listener's life, so a connection that keeps
	// failing right after each reconnect is retried ever more slowly; it
	// starts over once a connection has lasted.
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 100 * time.Millisecond
	b.MaxInterval = 10 * time.Second
	b.MaxElapsedTime = 0 // until ctx ends
	connectedAt := time.Now()
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err == nil {
			select {
			case ch <- n.Payload:
			default: // the reader is behind; it polls anyway
			}
			continue
		}
		// Closed rather than returned to the pool: the interrupted wait
		// may leave a subscribed connection in an unknown state.
		s.dropConn(conn)
		if ctx.Err() != nil {
			return
		}
		s.log.WarnContext(ctx, "rdq: notification listener lost its connection; reconnecting", "error", err)
		if time.Since(connectedAt) > time.Minute {
			b.Reset()
		}
		if conn = s.reconnect(ctx, b); conn == nil {
			return
		}
		connectedAt = time.Now()
	}
}

// reconnect re-establishes the listening connection, waiting out b before
// every attempt; nil when ctx ended first.
func (s *Store) reconnect(ctx context.Context, b backoff.BackOff) *pgxpool.Conn {
	wait := b.NextBackOff()
	for {
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
		conn, err := s.listen(ctx)
		if err == nil {
			s.log.InfoContext(ctx, "rdq: notification listener reconnected")
			return conn
		}
		if ctx.Err() != nil {
			return nil
		}
		wait = b.NextBackOff()
		s.log.WarnContext(ctx, "rdq: notification listener cannot reconnect", "error", err, "retry_in", wait)
	}
}

// dropConn closes conn and removes it from the pool.
func (s *Store) dropConn(conn *pgxpool.Conn) {
	raw := conn.Hijack()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := raw.Close(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		s.log.Debug("rdq: closing a listener connection", "error", err)
	}
}
