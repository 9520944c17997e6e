package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/opsgate/opsgate/core/shortid"
)

// fullIDLen is the length of the ids the server makes (UUIDs): an argument
// this long is taken as a whole id, never as a prefix.
const fullIDLen = 36

// resolveID turns what the operator typed into one id: a whole id is used
// as is; anything shorter is the short id the lists show (a prefix of the
// id's random part) or a prefix of the id, looked up with the list's
// id_prefix filter, and must name exactly one (kind "approval" or "run";
// core/shortid). The server accepts short ids in its paths too; resolving
// here first lets the CLI say what a typed id named, refuse an ambiguous
// one with the list, and tell a run's id typed where an approval's was
// meant.
func (a *adminCall) resolveID(ctx context.Context, kind, arg string) (string, error) {
	if len(arg) >= fullIDLen || !shortid.Valid(arg) {
		return arg, nil
	}
	cands, more, err := a.candidates(ctx, kind, arg)
	if err != nil {
		return "", err
	}
	c, err := shortid.Resolve(arg, cands)
	var ae *shortid.AmbiguousError
	switch {
	case err == nil:
		return c.ID, nil
	case errors.As(err, &ae):
		ae.More = ae.More || more
		return "", &ambiguousError{msg: kind + " id " + ae.Error()}
	}
	// Named nothing: perhaps the other kind's id was typed.
	other := "run"
	if kind == "run" {
		other = "approval"
	}
	if oc, _, oerr := a.candidates(ctx, other, arg); oerr == nil {
		if c, err := shortid.Resolve(arg, oc); err == nil {
			return "", fmt.Errorf("%q names no %s; it is %s %s (see `opsgate %ss show %s`)", arg, kind, other, c.ID, other, arg)
		}
	}
	return "", fmt.Errorf("no %s id matches %q (see `opsgate %ss list`)", kind, arg, kind)
}

// candidates lists the runs or approvals the server says arg may name;
// more reports that there were more than it lists.
func (a *adminCall) candidates(ctx context.Context, kind, arg string) ([]shortid.Candidate, bool, error) {
	c, err := a.api()
	if err != nil {
		return nil, false, err
	}
	var page struct {
		Items []struct {
			ID        string    `json:"id"`
			Status    string    `json:"status"`
			Tool      string    `json:"tool"`
			Flow      string    `json:"flow"`
			CreatedAt time.Time `json:"created_at"`
		} `json:"items"`
	}
	limit := shortid.MaxListed + 1
	q := url.Values{"id_prefix": {arg}, "limit": {strconv.Itoa(limit)}}
	if err := c.do(ctx, "GET", "/api/v1/"+kind+"s", q, nil, &page); err != nil {
		return nil, false, fmt.Errorf("find the %s %s: %w", kind, arg, err)
	}
	out := make([]shortid.Candidate, 0, len(page.Items))
	for _, it := range page.Items {
		out = append(out, shortid.Candidate{Kind: kind, ID: it.ID,
			Summary: fmt.Sprintf("%s, %s, %s", it.Tool+it.Flow, it.Status, fmtTime(it.CreatedAt))})
	}
	return out, len(page.Items) == limit, nil
}

// ambiguousError is a typed id that names several (exit status 1).
type ambiguousError struct{ msg string }

func (e *ambiguousError) Error() string { return e.msg }
