package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/config"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/store/postgres"
	"github.com/opsgate/opsgate/store/sqlite"
)

// store is what the binary needs of a backend beyond core.Store: migrating
// and verifying the audit chain. Both store/sqlite and store/postgres
// provide it; this is the only place that names them.
type store interface {
	core.Store
	Migrate(ctx context.Context) error
	// AuditVerify is what the web console's store needs.
	AuditVerify(ctx context.Context) (badSeq int64, err error)
	// AuditVerifyReport backs `opsgate audit verify`: the first entry that
	// does not link, and the chain's head.
	AuditVerifyReport(ctx context.Context) (approvals.ChainReport, error)
}

var (
	_ store = (*sqlite.Store)(nil)
	_ store = (*postgres.Store)(nil)
)

// openStore opens the configured backend. (store/sqlite creates the
// database file's directory itself, so a fresh install needs no mkdir.)
func openStore(ctx context.Context, cfg *config.Config) (store, error) {
	switch cfg.Store.Driver {
	case "sqlite", "":
		st, err := sqlite.Open(ctx, cfg.Store.DSN)
		if err != nil {
			return nil, fmt.Errorf("open SQLite store %s: %w", cfg.Store.DSN, err)
		}
		return st, nil
	case "postgres":
		st, err := postgres.Open(ctx, cfg.Store.DSN)
		if err != nil {
			return nil, fmt.Errorf("open Postgres store %s: %w", redactDSN(cfg.Store.DSN), err)
		}
		return st, nil
	default:
		return nil, fmt.Errorf("store.driver %q: want sqlite or postgres", cfg.Store.Driver)
	}
}

// redactDSN hides a password in a DSN so it can be logged and printed.
func redactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			return u.String()
		}
		return u.String()
	}
	// keyword=value form: blank out password=...
	fields := strings.Fields(dsn)
	for i, f := range fields {
		if strings.HasPrefix(strings.ToLower(f), "password=") {
			fields[i] = "password=xxxxx"
		}
	}
	return strings.Join(fields, " ")
}
