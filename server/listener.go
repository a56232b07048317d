package server

import (
	"errors"
	"net"
	"sync"
)

// LimitListener returns a listener that keeps at most n connections
// accepted through l open at once: a connection arriving while n are open
// is closed at once, so the client fails fast (and may retry elsewhere)
// instead of holding server resources. Use it for both the REST and the
// gRPC listener; n must be at least 1.
func LimitListener(l net.Listener, n int) (net.Listener, error) {
	if n < 1 {
		return nil, errors.New("server: LimitListener: the connection limit must be at least 1")
	}
	return &limitListener{Listener: l, free: make(chan struct{}, n)}, nil
}

type limitListener struct {
	net.Listener
	free chan struct{} // holds a token per open connection
}

// Accept returns the next connection within the limit.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.free <- struct{}{}:
			return &limitConn{Conn: c, release: func() { <-l.free }}, nil
		default:
			// Over the limit: refuse this one. Closing a connection that
			// was never used has nothing to report.
			_ = c.Close()
		}
	}
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

// Close closes the connection and frees its place, once.
func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
