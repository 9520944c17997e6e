package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/internal/client"
)

// `opsgate approvals watch` and `opsgate approvals wait`: the approvals
// queue for scripts, over the API's change feed (GET /api/v1/events).

// The exit statuses of `approvals wait` (docs/terminal.md): the answer a
// CI job branches on. 0, 1 and 2 keep their usual meaning where they can.
const (
	waitApproved  = 0 // approved or edited: the call goes ahead
	waitRejected  = 1
	waitExpired   = 3 // no decision in time (approvals.ttl)
	waitCancelled = 4 // the run was cancelled before a decision
	waitUnknown   = 5 // could not find out: unknown id, no access, a server error
	waitTimeout   = 6 // --timeout passed while still pending
)

// terminal returns the typed client of the terminal surfaces for the same
// server and token the admin call resolved.
func (a *adminCall) terminal() (*client.Client, error) {
	c, err := a.api()
	if err != nil {
		return nil, err
	}
	return client.New(c.base.String(), c.token)
}

// fatalStatus reports an API answer that retrying cannot change.
func fatalStatus(err error) bool {
	s := client.StatusOf(err)
	return s == 400 || s == 401 || s == 403 || s == 404 || s == 422
}

// reconnectDelay is the pause before the n-th reconnection of a lost
// stream: 1 s doubling to 10 s.
func reconnectDelay(n int) time.Duration {
	d := time.Second << min(n, 4)
	return min(d, 10*time.Second)
}

// sleepCtx waits d or until ctx ends (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// field makes a value from outside one tab-free field of a watch line.
func field(s string) string {
	s = strings.ReplaceAll(core.OneLine(s), "\t", " ")
	if s == "" {
		return "-"
	}
	return s
}

// watchLine is the stable one-line form of a new approval: tab-separated
// id, tool, risk, requester, thread, expires_at and the proposed arguments
// as compact JSON with sorted keys.
func watchLine(a *client.Approval) string {
	return strings.Join([]string{field(a.ID), field(a.Tool), field(string(a.Risk)), field(a.Requester), field(a.Thread),
		field(a.ExpiresAt), compact(a.ProposedArgs)}, "\t")
}

func watchSub() adminSub {
	return adminSub{name: "watch", summary: "print one line per new approval, as they come (for scripts)",
		about: `Prints each pending approval once: those pending now (unless --new), then each new
one as it is asked, until interrupted or --count lines. A line is tab-separated:
  ID  TOOL  RISK  REQUESTER  THREAD  EXPIRES_AT  ARGS(JSON)
With --json, one JSON object (the API's approval) per line instead. A lost
connection is retried; no approval is printed twice.`,
		flags: func(fs *flagSet) func(context.Context, *adminCall, []string) error {
			onlyNew := fs.Bool("new", false, "skip the approvals already pending when watch starts")
			count := fs.Int("count", 0, "exit 0 after printing this many approvals (0: run until interrupted)")
			return func(ctx context.Context, a *adminCall, _ []string) error {
				if *count < 0 {
					return usagef("--count %d: want 0 or more", *count)
				}
				if a.format() == outputYAML {
					return usagef("approvals watch prints lines or JSON (-o json), not yaml")
				}
				c, err := a.terminal()
				if err != nil {
					return err
				}
				return watchApprovals(ctx, c, a.stdout, a.stderr, *onlyNew, *count, a.format() == outputJSON)
			}
		}}
}

// errWatchDone ends the stream once --count lines were printed.
var errWatchDone = errors.New("done")

func watchApprovals(ctx context.Context, c *client.Client, stdout, stderr io.Writer, onlyNew bool, count int, asJSON bool) error {
	seen := map[string]bool{}
	printed := 0
	first := true
	for attempt := 0; ; attempt++ {
		ready := false
		err := c.Events(ctx, "/api/v1/events", url.Values{"kinds": {"approvals"}}, "", func(ev client.Event) error {
			switch ev.Type {
			case "ready":
				if first {
					// On stderr, so stdout stays one line per approval.
					var n struct {
						Approvals int `json:"approvals"`
					}
					_ = json.Unmarshal(ev.Data, &n)
					fmt.Fprintf(stderr, "opsgate: watching approvals at %s: %d pending\n", c.Server(), n.Approvals)
				}
				ready, first = true, false
				attempt = 0
				return nil
			case "approval":
			default:
				return nil // unknown events are ignored, as the API asks
			}
			var ap client.Approval
			if err := json.Unmarshal(ev.Data, &ap); err != nil {
				return fmt.Errorf("approval event: %w", err)
			}
			if ap.Status != approvals.StatusPending || seen[ap.ID] {
				return nil
			}
			seen[ap.ID] = true
			if first && !ready && onlyNew {
				return nil
			}
			if asJSON {
				b, _ := json.Marshal(ap)
				fmt.Fprintf(stdout, "%s\n", b)
			} else {
				fmt.Fprintln(stdout, watchLine(&ap))
			}
			if printed++; count > 0 && printed >= count {
				return errWatchDone
			}
			return nil
		})
		switch {
		case errors.Is(err, errWatchDone), ctx.Err() != nil:
			return nil
		case fatalStatus(err):
			return fmt.Errorf("approvals watch: %w", err)
		}
		why := "the server closed the stream"
		if err != nil {
			why = err.Error()
		}
		d := reconnectDelay(attempt)
		fmt.Fprintf(stderr, "opsgate: approvals watch: %s; reconnecting in %s\n", why, d)
		if !sleepCtx(ctx, d) {
			return nil
		}
	}
}

func waitSub() adminSub {
	return adminSub{name: "wait", args: "ID", summary: "wait for a decision; the exit status says which (for CI)",
		about: `Waits until the approval is decided or expires, prints the outcome and exits with:
  0  approved or edited (the call goes ahead; edited arguments are printed)
  1  rejected (the reason is printed)
  2  bad usage
  3  expired with no decision
  4  cancelled: the run was cancelled before a decision
  5  could not find out (unknown id, no access, a server error)
  6  --timeout passed while still pending
A lost connection is retried until --timeout.` + fmt.Sprintf(idNote, "approvals", "wait"),
		flags: func(fs *flagSet) func(context.Context, *adminCall, []string) error {
			timeout := fs.Duration("timeout", 0, "give up (exit 6) after this long, e.g. 30m (0: wait as long as it takes)")
			return func(ctx context.Context, a *adminCall, pos []string) error {
				if *timeout < 0 {
					return usagef("--timeout %s: want 0 or more", *timeout)
				}
				if a.format() == outputYAML {
					return usagef("approvals wait prints a line or JSON (-o json), not yaml")
				}
				id, err := a.resolveID(ctx, "approval", pos[0])
				if err != nil {
					return &exitError{code: waitUnknown, msg: err.Error()}
				}
				c, err := a.terminal()
				if err != nil {
					return &exitError{code: waitUnknown, msg: err.Error()}
				}
				if *timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, *timeout)
					defer cancel()
				}
				return waitApproval(ctx, c, id, a.stdout, a.stderr, a.format() == outputJSON, *timeout)
			}
		}}
}

// errDecided ends the stream once the approval has its outcome.
var errDecided = errors.New("decided")

func waitApproval(ctx context.Context, c *client.Client, id string, stdout, stderr io.Writer, asJSON bool, timeout time.Duration) error {
	var final *client.Approval
	cancelled := false
	check := func() error {
		ap, err := c.Approval(ctx, id)
		if err != nil {
			return err
		}
		if ap.Status != approvals.StatusPending {
			final = ap
		}
		return nil
	}
	for attempt := 0; final == nil; attempt++ {
		// Read it first on every (re)connection: it may have been decided
		// before the stream opened, or while it was lost.
		err := check()
		if err == nil && final == nil {
			err = c.Events(ctx, "/api/v1/events", nil, "", func(ev client.Event) error {
				switch ev.Type {
				case "ready":
					attempt = 0
					// Decided between the read above and the stream's first
					// pass, it is in no snapshot (only pending ones are) and
					// will not change again: read it once more.
					if err := check(); err != nil {
						return err
					}
					if final != nil {
						return errDecided
					}
				case "approval":
					var ap client.Approval
					if json.Unmarshal(ev.Data, &ap) == nil && ap.ID == id && ap.Status != approvals.StatusPending {
						final = &ap
						return errDecided
					}
				case "run":
					var r client.Run
					if json.Unmarshal(ev.Data, &r) == nil && r.Status == core.RunCancelled && final == nil {
						// The approval of a cancelled run expires with it;
						// its own event follows (or the next check sees it).
						if ap, gerr := c.Approval(ctx, id); gerr == nil && r.ID == ap.RunID {
							cancelled = true
						}
					}
				}
				return nil
			})
		}
		switch {
		case final != nil:
		case ctx.Err() != nil:
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return &exitError{code: waitTimeout, msg: fmt.Sprintf("approval %s is still pending after %s", id, timeout)}
			}
			return &exitError{code: waitUnknown, msg: "interrupted while approval " + id + " was pending"}
		case fatalStatus(err):
			return &exitError{code: waitUnknown, msg: fmt.Sprintf("approvals wait %s: %v", id, err)}
		default:
			why := "the server closed the stream"
			if err != nil {
				why = err.Error()
			}
			d := reconnectDelay(attempt)
			fmt.Fprintf(stderr, "opsgate: approvals wait: %s; reconnecting in %s\n", why, d)
			if !sleepCtx(ctx, d) {
				continue // the switch above reports the timeout or interrupt
			}
		}
	}
	// The run's status tells a cancelled run's expiry from a plain one.
	if final.Status == approvals.StatusExpired && !cancelled {
		if r, err := c.Run(context.WithoutCancel(ctx), final.RunID); err == nil && r.Status == core.RunCancelled {
			cancelled = true
		}
	}
	if asJSON {
		b, _ := json.Marshal(final)
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		fmt.Fprintln(stdout, outcomeLine(final, cancelled))
	}
	switch {
	case final.Status == approvals.StatusApproved || final.Status == approvals.StatusEdited:
		return nil
	case final.Status == approvals.StatusRejected:
		return &exitError{code: waitRejected}
	case cancelled:
		return &exitError{code: waitCancelled}
	default:
		return &exitError{code: waitExpired}
	}
}

// outcomeLine says how an approval ended: "approved 0199… by console:admin".
func outcomeLine(a *client.Approval, cancelled bool) string {
	var by []string
	reason := ""
	for _, d := range a.Decisions {
		if d.Superseded || d.Channel == "system" {
			continue
		}
		by = append(by, d.Actor)
		if d.Reason != "" {
			reason = d.Reason
		}
	}
	status := string(a.Status)
	if cancelled {
		status = "cancelled"
	}
	line := status + " " + a.ID
	if len(by) > 0 && (a.Status == approvals.StatusApproved || a.Status == approvals.StatusEdited || a.Status == approvals.StatusRejected) {
		line += " by " + core.OneLine(strings.Join(by, ", "))
	}
	if a.Status == approvals.StatusEdited {
		if m, ok := a.ApprovedArgs.(map[string]any); ok {
			line += " args " + compact(m)
		}
	}
	if reason != "" {
		line += ": " + core.OneLine(reason)
	}
	return line
}
