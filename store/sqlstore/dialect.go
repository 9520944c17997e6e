package sqlstore

import (
	"strconv"
	"strings"
)

// Dialect is everything the shared SQL needs to know about a backend. It is
// deliberately data, not an interface: the differences between SQLite and
// Postgres that matter here are a handful of clauses.
type Dialect struct {
	// Name identifies the backend in errors and logs ("sqlite", "postgres").
	Name string
	// Numbered makes Rebind turn ? into $1, $2, ... (Postgres).
	Numbered bool
	// SkipLocked ends a SELECT that claims work rows: concurrent claimers
	// pass over rows another transaction holds. Empty on SQLite, where the
	// write transaction already excludes every other writer.
	SkipLocked string
	// ForUpdate ends a SELECT that reads a row the transaction will change,
	// so a concurrent writer waits instead of working from a stale copy.
	ForUpdate string
	// AuditLock, when set, is executed before the audit tail is read, so
	// concurrent appends form one chain (Postgres: a transaction-scoped
	// advisory lock). SQLite needs none: writers are serialized.
	AuditLock string
	// DeferAuditSeal makes transactions queue audit entries in
	// audit_pending and a sealer chain them after commit, under AuditLock
	// (which must be set), instead of holding AuditLock through every
	// auditing commit; see appendAudit. Postgres only: SQLite serializes
	// writers anyway, so sealing inline costs it nothing.
	DeferAuditSeal bool
	// OneStatement makes InboxRecord and RunCheckpoint single statements
	// (data-modifying CTEs guarded by the first; wake-ups are sent after
	// commit by the notifier), one round trip each instead of a
	// transaction of six or seven; see onestmt.go. Postgres only; requires
	// DeferAuditSeal.
	OneStatement bool
	// NotifySQL, when set, is an expression taking a channel name and a
	// payload, which the store's notifier SELECTs after commits (batched,
	// outside the committing transaction; see notify.go) so other
	// processes wake (Postgres: pg_notify(?, ?)). The payload is
	// "<instance>|<run id>" for the events topic, "<instance>|" otherwise. The backend must then feed what
	// it hears from other instances back to the Hub; local subscribers are
	// woken directly after commit either way.
	NotifySQL string
	// ChannelPrefix prefixes topic names to form notification channels.
	ChannelPrefix string
	// IndexedBy names, in the claim statements, the partial indexes of
	// migration 0016 (SQLite's INDEXED BY): without statistics SQLite's
	// planner preferred the wider status indexes (dropped in migration
	// 0019) and sorted every pending row; the hint keeps any index added
	// later from doing the same. Postgres picks the partial indexes from
	// its statistics.
	IndexedBy bool
	// Fence ends a correlated EXISTS subquery that must stay a subplan:
	// Postgres's " OFFSET 0" keeps it from being turned into a join, whose
	// inner side a planner that estimates the pending rows at none (as
	// statistics taken while nothing was pending do) may read whole,
	// unparameterized, for every outer row.
	Fence string
}

// indexedBy is the claim statements' index hint for table alias index.
func (d Dialect) indexedBy(index string) string {
	if !d.IndexedBy {
		return ""
	}
	return " INDEXED BY " + index
}

// ChannelPrefixDefault is the prefix of opsgate's notification channels:
// topic "runs" is channel "opsgate_runs".
const ChannelPrefixDefault = "opsgate_"

// auditLockKey is the advisory lock id that serializes audit appends on
// Postgres (an arbitrary constant: "opsgate" audit).
const auditLockKey = 0x6f70736761746501

// SQLiteDialect is the dialect of store/sqlite.
func SQLiteDialect() Dialect {
	return Dialect{Name: "sqlite", ChannelPrefix: ChannelPrefixDefault, IndexedBy: true}
}

// PostgresDialect is the dialect of store/postgres.
func PostgresDialect() Dialect {
	return Dialect{
		Name:           "postgres",
		Numbered:       true,
		SkipLocked:     " FOR UPDATE SKIP LOCKED",
		ForUpdate:      " FOR UPDATE",
		AuditLock:      "SELECT pg_advisory_xact_lock(" + strconv.FormatInt(auditLockKey, 10) + ")",
		DeferAuditSeal: true,
		OneStatement:   true,
		NotifySQL:      "pg_notify(?, ?)",
		ChannelPrefix:  ChannelPrefixDefault,
		Fence:          " OFFSET 0",
	}
}

// Channel names the notification channel of topic.
func (d Dialect) Channel(topic string) string { return d.ChannelPrefix + topic }

// Rebind rewrites ? placeholders for the backend. The shared queries never
// contain a literal question mark, so no quoting rules are needed.
func (d Dialect) Rebind(q string) string {
	if !d.Numbered || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}
