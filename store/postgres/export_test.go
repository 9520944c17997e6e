package postgres

import "context"

// OpenTransactional opens like Open but writes InboxRecord and
// RunCheckpoint as multi-statement transactions (the path SQLite runs)
// instead of single statements, so the conformance suite covers both write
// paths on Postgres.
func OpenTransactional(ctx context.Context, dsn string) (*Store, error) {
	return OpenWith(ctx, dsn, Options{transactional: true})
}
