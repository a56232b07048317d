package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"

	"github.com/srjn45/rdq/dlq"
	"github.com/srjn45/rdq/store"
	"github.com/srjn45/rdq/storeurl"
)

// backend is an opened store with what the command needs beyond the DLQ.
// It wraps the store (store.Wrapper), so the accessors of package store
// find the store's optional capabilities through it.
type backend struct {
	dlq.Backend
	close func()
	// desc names the database for people, without secrets.
	desc string
}

// Unwrap returns the store b opened.
func (b *backend) Unwrap() store.Store { return b.Backend }

// databaseURL is the URL the flags and environment select, with --schema
// folded into a PostgreSQL URL as its schema parameter.
func (e *env) databaseURL() (string, error) {
	raw := strings.TrimSpace(e.g.databaseURL)
	if e.g.schema == "" {
		return raw, nil
	}
	lower := strings.ToLower(raw)
	if !strings.HasPrefix(lower, "postgres://") && !strings.HasPrefix(lower, "postgresql://") {
		return "", usageErrorf("--schema applies to PostgreSQL only; the database is %s", storeurl.Describe(raw))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", usageErrorf("--database-url is not a valid URL: %s", storeurl.Describe(raw))
	}
	q := u.Query()
	q.Set(storeurl.SchemaParam, e.g.schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// openBackend opens the store the flags name, without migrating it: only
// 'rdq migrate' changes the schema (migrate set), so an operator's command
// never upgrades a database under running workers by surprise. A missing
// SQLite file is created only by migrate.
func (e *env) openBackend(migrate bool) (*backend, error) {
	raw, err := e.databaseURL()
	if err != nil {
		return nil, err
	}
	secret := queryPassword(raw)
	t, err := storeurl.Parse(raw)
	if err != nil {
		return nil, hideSecret(err, secret)
	}
	desc := storeurl.Describe(raw) // never shows a password
	e.desc = desc
	if t.Kind == storeurl.SQLite && !migrate {
		if _, err := os.Stat(t.Path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no rdq database at %s: run 'rdq migrate' to create one, or point --database-url (or RDQ_DATABASE_URL) at yours", t.Path)
		}
	}
	if migrate {
		e.announce(desc)
	}
	s, err := storeurl.OpenTarget(e.ctx, t, storeurl.Config{NoMigrate: !migrate})
	if err != nil {
		if t.Kind == storeurl.Postgres && !errors.Is(err, context.Canceled) {
			err = fmt.Errorf("%w (is the server up, and the URL right? set --database-url or RDQ_DATABASE_URL)", err)
		}
		return nil, hideSecret(err, secret)
	}
	return &backend{
		Backend: s,
		close: func() {
			if err := s.Close(); err != nil {
				fmt.Fprintf(e.stderr, "rdq: closing %s: %v\n", desc, err)
			}
		},
		desc: desc,
	}, nil
}

// queryPassword returns the password given as a query parameter of a URL
// (postgres://host/db?password=...), which URL redaction does not hide.
func queryPassword(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Query().Get("password")
}

// hideSecret replaces secret in err's text, keeping its exit code.
func hideSecret(err error, secret string) error {
	if secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return &codedError{code: exitCode(err), err: errors.New(strings.ReplaceAll(err.Error(), secret, "xxxxx"))}
}
