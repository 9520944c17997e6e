package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"
)

// `opsgate grants …`: list and revoke task, session and forever grants.

// grantView is a grant as GET /api/v1/grants returns it.
type grantView struct {
	ID         string            `json:"id"`
	Scope      string            `json:"scope"`
	Tool       string            `json:"tool"`
	Thread     string            `json:"thread"`
	Requester  string            `json:"requester"`
	RunID      string            `json:"run_id"`
	Rule       string            `json:"rule"`
	Until      *time.Time        `json:"until"`
	Args       map[string]any    `json:"args"`
	Pattern    map[string]string `json:"pattern"`
	ApprovalID string            `json:"approval_id"`
	GrantedBy  string            `json:"granted_by"`
	CreatedAt  time.Time         `json:"created_at"`
	ExpiresAt  *time.Time        `json:"expires_at"`
	RevokedAt  *time.Time        `json:"revoked_at"`
	RevokedBy  string            `json:"revoked_by"`
	Active     bool              `json:"active"`
}

func cmdGrants(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	subs := []adminSub{
		{name: "list", summary: "task, session and forever grants in force (or --all)", wide: true,
			about: "Lists grants, newest first: what each covers, for whom, who granted it, when it ends.",
			flags: func(fs *flagSet) func(context.Context, *adminCall, []string) error {
				all := fs.Bool("all", false, "revoked and expired grants too")
				limit := fs.Int("limit", 50, "at most this many")
				return func(ctx context.Context, a *adminCall, _ []string) error {
					q := url.Values{"limit": {strconv.Itoa(*limit)}}
					if *all {
						q.Set("status", "all")
					}
					var page struct {
						Items []grantView `json:"items"`
					}
					if done, err := a.call(ctx, "grants list", "GET", "/api/v1/grants", q, nil, &page); done {
						return err
					}
					wide := a.format() == outputWide
					tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
					fmt.Fprint(tw, "ID\tSCOPE\tTOOL\tCOVERS\tFOR\tGRANTED BY\tCREATED\tENDS")
					if wide {
						fmt.Fprint(tw, "\tAPPROVAL")
					}
					fmt.Fprintln(tw)
					for _, g := range page.Items {
						covers := grantCovers(g)
						who := "anyone"
						switch {
						case g.RunID != "":
							who = "run " + g.RunID
						case g.Requester != "":
							who = g.Requester + " in " + g.Thread
						}
						ends := "when revoked"
						switch {
						case g.RevokedAt != nil:
							ends = "revoked " + fmtTime(*g.RevokedAt) + " by " + g.RevokedBy
						case g.Until != nil:
							ends = fmtTime(*g.Until)
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", g.ID, g.Scope, cell(g.Tool), cell(covers), cell(who), cell(g.GrantedBy),
							fmtTime(g.CreatedAt), cell(ends))
						if wide {
							fmt.Fprintf(tw, "\t%s", g.ApprovalID)
						}
						fmt.Fprintln(tw)
					}
					return tw.Flush()
				}
			}},
		{name: "revoke", args: "ID", summary: "revoke a grant (audited)",
			about: "Revokes the grant: the calls it covered ask again. Needs scope decide or admin.",
			flags: func(fs *flagSet) func(context.Context, *adminCall, []string) error {
				return func(ctx context.Context, a *adminCall, pos []string) error {
					var g grantView
					if done, err := a.call(ctx, "grants revoke "+pos[0], "DELETE", "/api/v1/grants/"+url.PathEscape(pos[0]), nil, nil, &g); done {
						return err
					}
					fmt.Fprintf(a.stdout, "grant %s (%s, %s) is revoked\n", g.ID, g.Scope, g.Tool)
					return nil
				}
			}},
	}
	return runAdmin(ctx, "grants", "List and revoke task, session and forever grants, over the server's API.", subs, args, stdout, stderr)
}
