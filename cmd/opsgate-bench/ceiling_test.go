package main

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/store/pgtest"
)

func TestCeilingRefusesOtherHostsAndUnboundedLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		name string
		o    ceilingOptions
	}{
		{"remote host", ceilingOptions{dsn: "postgres://u@10.0.0.1:5432/db", txs: 1, clients: 1}},
		{"named host", ceilingOptions{dsn: "postgres://u@db.example.com/db", txs: 1, clients: 1}},
		{"key=value DSN", ceilingOptions{dsn: "host=127.0.0.1 dbname=db", txs: 1, clients: 1}},
		{"no transactions", ceilingOptions{dsn: "postgres://u@127.0.0.1/db", txs: 0, clients: 1}},
		{"too many clients", ceilingOptions{dsn: "postgres://u@127.0.0.1/db", txs: 1, clients: 5000}},
	} {
		if err := ceiling(ctx, c.o, &strings.Builder{}); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
	if err := runCeiling(ctx, nil, &strings.Builder{}, &strings.Builder{}); err == nil {
		t.Error("no --dsn accepted")
	}
}

func TestCeilingCommitsAndDropsItsTable(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	var out strings.Builder
	if err := ceiling(context.Background(), ceilingOptions{dsn: dsn, txs: 40, clients: 4}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "40 transactions of 3 single-row INSERTs, 4 clients") ||
		!strings.Contains(out.String(), "120 rows") {
		t.Errorf("output = %q", out.String())
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var left int
	if err := db.QueryRow(`SELECT count(*) FROM pg_tables WHERE tablename LIKE 'opsgate_bench_ceiling_%'`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d ceiling tables left behind", left)
	}
}
