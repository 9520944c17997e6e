package postgres

import (
	"errors"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/opsgate/opsgate/core"
)

// classify maps the driver's errors onto what they mean to a caller (see
// sqlstore.Config.Classify), by SQLSTATE
// (https://www.postgresql.org/docs/current/errcodes-appendix.html): a
// value Postgres cannot hold (a NUL, invalid UTF-8) is invalid input; a
// server that cannot be reached, is shutting down, is out of disk or
// connections, or is read-only (a standby) is the store being unavailable.
func classify(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "22021" || pe.Code == "22P05": // character_not_in_repertoire, untranslatable_character
			return &core.InputError{Field: "value", Reason: "not storable text (a NUL or invalid UTF-8)"}
		case strings.HasPrefix(pe.Code, "08"):
			return unavailable("connection failure", err)
		case pe.Code == "53100":
			return unavailable("disk full", err)
		case strings.HasPrefix(pe.Code, "53"):
			return unavailable("out of resources", err)
		case pe.Code == "25006":
			return unavailable("read-only", err)
		case pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03":
			return unavailable("shutting down or starting", err)
		}
		return nil
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	if errors.As(err, &ce) || errors.As(err, &ne) {
		return unavailable("unreachable", err)
	}
	return nil
}

func unavailable(reason string, err error) error {
	return &core.StoreUnavailableError{Store: "postgres", Reason: reason, Err: err}
}
