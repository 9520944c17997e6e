package sqlite

import (
	"errors"

	sqlitedrv "modernc.org/sqlite"

	"github.com/opsgate/opsgate/core"
)

// SQLite's primary result codes that mean the database cannot take writes
// now, whatever was asked (https://sqlite.org/rescode.html).
const (
	codeBusy     = 5
	codeReadOnly = 8
	codeIOErr    = 10
	codeFull     = 13
	codeCantOpen = 14
)

// classify maps the driver's errors onto what they mean to a caller (see
// sqlstore.Config.Classify): a full disk, a read-only or unopenable file,
// an I/O error or a lock another process holds past the busy timeout are
// the store being unavailable.
func classify(err error) error {
	var se *sqlitedrv.Error
	if !errors.As(err, &se) {
		return nil
	}
	var reason string
	switch se.Code() & 0xff {
	case codeFull:
		reason = "disk full"
	case codeReadOnly:
		reason = "read-only"
	case codeIOErr:
		reason = "I/O error"
	case codeCantOpen:
		reason = "cannot open the database file"
	case codeBusy:
		reason = "locked by another process"
	default:
		return nil
	}
	return &core.StoreUnavailableError{Store: "sqlite", Reason: reason, Err: err}
}
