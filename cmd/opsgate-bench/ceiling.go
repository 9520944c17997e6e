package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"
)

// ceilingOptions are the knobs of `opsgate-bench ceiling`.
type ceilingOptions struct {
	dsn          string
	txs, clients int
}

// ceiling measures what the Postgres server itself commits: --txs
// transactions of three single-row INSERTs each (as many rows as an
// inbound event's record: the event, its run, its first run event), from
// --clients connections, into a table of its own that it drops afterwards.
// It is the yardstick for opsgate's acked rate on the same server: no
// durable ingest can beat it.
func ceiling(ctx context.Context, o ceilingOptions, stdout io.Writer) error {
	if o.txs < 1 || o.txs > 10_000_000 || o.clients < 1 || o.clients > 1024 {
		return errors.New("ceiling: 1 ≤ --txs ≤ 1e7 and 1 ≤ --clients ≤ 1024")
	}
	if err := loopbackDSN(o.dsn); err != nil {
		return fmt.Errorf("ceiling: --dsn: %w", err)
	}
	db, err := sql.Open("pgx", o.dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(o.clients)
	db.SetMaxIdleConns(o.clients)
	table := "opsgate_bench_ceiling_" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	if _, err := db.ExecContext(ctx, `CREATE TABLE `+table+` (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		k text NOT NULL UNIQUE, v text NOT NULL, at bigint NOT NULL)`); err != nil {
		return fmt.Errorf("ceiling: create %s: %w", table, err)
	}
	defer func() { _, _ = db.ExecContext(context.WithoutCancel(ctx), `DROP TABLE `+table) }()
	insert := `INSERT INTO ` + table + ` (k, v, at) VALUES ($1, $2, $3)`
	var rows atomic.Int64
	start := time.Now()
	err = pool(ctx, o.txs, o.clients, func(ctx context.Context, i int) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		for j := range 3 {
			if _, err := tx.ExecContext(ctx, insert, fmt.Sprintf("%d-%d", i, j), "bench", time.Now().UnixMicro()); err != nil {
				_ = tx.Rollback()
				return err
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		rows.Add(3)
		return nil
	})
	if err != nil {
		return fmt.Errorf("ceiling: %w", err)
	}
	elapsed := time.Since(start)
	fmt.Fprintf(stdout, "ceiling:   %d transactions of 3 single-row INSERTs, %d clients: %.0f tx/s (%.2fs, %d rows)\n",
		o.txs, o.clients, float64(o.txs)/elapsed.Seconds(), elapsed.Seconds(), rows.Load())
	return nil
}

// runCeiling is `opsgate-bench ceiling`.
func runCeiling(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o ceilingOptions
	fs := flag.NewFlagSet("opsgate-bench ceiling", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.dsn, "dsn", "", "Postgres DSN, URL form, on loopback (the server's store.dsn will do)")
	fs.IntVar(&o.txs, "txs", 10_000, "transactions to commit")
	fs.IntVar(&o.clients, "clients", 16, "concurrent connections")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.dsn == "" || fs.NArg() > 0 {
		return errors.New("ceiling: --dsn is required and takes no arguments")
	}
	return ceiling(ctx, o, stdout)
}
