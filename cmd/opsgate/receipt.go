package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/approvals/receipt"
	"github.com/opsgate/opsgate/core/api"
)

// cmdReceipt is `opsgate receipt verify`: offline with --key, or with the
// key the server publishes.
func cmdReceipt(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	subs := []adminSub{{name: "verify", args: "RECEIPT|-", summary: "check a receipt's signature, digest and expiry",
		about: "Verifies an approval receipt (a compact JWS; - reads it from stdin): its EdDSA signature with the\n" +
			"receipt key (--key FILE: the JWK of GET /api/v1/receipts/key, a PEM public key, or the key file\n" +
			"itself; without --key the key is fetched from the server), its expiry, and that the arguments\n" +
			"(--args, else the receipt's own) hash to its digest. Exit 0: valid and it approves; 1: anything\n" +
			"else, the reason on stderr (a valid receipt of a rejection included). docs/receipts.md.",
		flags: func(fs *flagSet) func(context.Context, *adminCall, []string) error {
			keyFile := fs.String("key", "", "the verification key: a JWK, a PEM public key, or the PEM key file (default: fetch it from --server)")
			argsJSON := fs.String("args", "", "the arguments about to run, as one JSON object: they must hash to the receipt's digest")
			return func(ctx context.Context, a *adminCall, pos []string) error {
				var args map[string]any
				if *argsJSON != "" {
					var err error
					if args, err = parseArgsFlag(*argsJSON); err != nil {
						return usagef("%v", err)
					}
				}
				token, err := readReceiptArg(pos[0])
				if err != nil {
					return err
				}
				key, err := receiptKey(ctx, a, *keyFile)
				if err != nil {
					return err
				}
				c, err := receipt.Verify(token, key, time.Now())
				if err == nil && args != nil {
					err = c.Check(args)
				}
				if err != nil {
					return fmt.Errorf("receipt verify: %w", err)
				}
				switch f := a.format(); f {
				case outputJSON, outputYAML:
					raw, err := json.Marshal(c)
					if err != nil {
						return err
					}
					if f == outputJSON {
						err = printJSON(a.stdout, raw)
					} else {
						err = printYAML(a.stdout, raw)
					}
					if err != nil {
						return err
					}
				default:
					printReceipt(a.stdout, c)
				}
				if !c.Approved() {
					return fmt.Errorf("receipt verify: %w: approval %s was %s", receipt.ErrNotApproved, c.ApprovalID, c.Decision)
				}
				return nil
			}
		}}}
	return runAdmin(ctx, "receipt", "Verify approval receipts: proof that people approved exactly a call.", subs, args, stdout, stderr)
}

// readReceiptArg is the receipt given on the command line, or read from
// stdin for "-".
func readReceiptArg(arg string) (string, error) {
	if arg != "-" {
		return arg, nil
	}
	b, err := io.ReadAll(io.LimitReader(os.Stdin, receipt.MaxLen+1))
	if err != nil {
		return "", fmt.Errorf("read the receipt from stdin: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// receiptKey reads the key from file, or fetches the server's.
func receiptKey(ctx context.Context, a *adminCall, file string) (ed25519.PublicKey, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--key: %w", err)
		}
		return receipt.ParseKey(b)
	}
	c, err := a.api()
	if err != nil {
		return nil, err
	}
	var raw json.RawMessage
	if err := c.do(ctx, "GET", "/api/v1/receipts/key", nil, nil, &raw); err != nil {
		return nil, fmt.Errorf("fetch the receipt key: %w", err)
	}
	return receipt.ParseKey(raw)
}

func printReceipt(w io.Writer, c *receipt.Claims) {
	fmt.Fprintf(w, "receipt   valid (signature, digest, not expired)\napproval  %s\ndecision  %s at %s\ntool      %s %s\n",
		c.ApprovalID, c.Decision, c.DecidedAt, c.Tool, compactAny(c.Args))
	fmt.Fprintf(w, "digest    %s (rule %s, policy %s)\nrun       %s\nrequester %s\nexpires   %s\nnonce     %s\n",
		c.Digest, c.Rule, c.Policy, c.RunID, c.Requester, time.Unix(c.ExpiresAt, 0).UTC().Format(time.RFC3339), c.ID)
	for _, d := range c.Deciders {
		fmt.Fprintf(w, "decider   %s as %s via %s: %s at %s\n", d.Person, d.Identity, d.Channel, d.Action, d.At)
	}
}

func compactAny(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// approvalsReceiptSub is `opsgate approvals receipt ID`: the signed
// receipt of a decided approval, as the tool that ran got it.
func approvalsReceiptSub() adminSub {
	return adminSub{name: "receipt", args: "ID", summary: "the signed receipt of a decided approval",
		about: "Prints the approval's receipt (a compact JWS): pipe it to `opsgate receipt verify -`." + fmt.Sprintf(idNote, "approvals", "receipt"),
		flags: func(fs *flagSet) func(context.Context, *adminCall, []string) error {
			return func(ctx context.Context, a *adminCall, pos []string) error {
				id, err := a.resolveID(ctx, "approval", pos[0])
				if err != nil {
					return err
				}
				var v struct {
					Receipt string `json:"receipt"`
				}
				if done, err := a.call(ctx, "approvals receipt "+id, "GET", "/api/v1/approvals/"+url.PathEscape(id)+"/receipt", nil, nil, &v); done {
					return err
				}
				fmt.Fprintln(a.stdout, v.Receipt)
				return nil
			}
		}}
}

// approvalsDelegateSub is `opsgate approvals delegate ID --to WHO`.
func approvalsDelegateSub() adminSub {
	return adminSub{name: "delegate", args: "ID", summary: "hand an approval to a person or group (--to)",
		about: "Hands the pending approval to a person (person:<name>) or approver group (group:<name>) the\n" +
			"configuration names: they may decide it, and you no longer may. Audited; the card is updated." +
			fmt.Sprintf(idNote, "approvals", "delegate"),
		flags: func(fs *flagSet) func(context.Context, *adminCall, []string) error {
			to := fs.String("to", "", "person:<name> or group:<name> (required)")
			reason := fs.String("reason", "", "why; recorded with the hand-over")
			return func(ctx context.Context, a *adminCall, pos []string) error {
				if !strings.HasPrefix(*to, approvals.PersonPrefix) && !strings.HasPrefix(*to, approvals.GroupPrefix) {
					return usagef("--to %q: want person:<name> or group:<name>", *to)
				}
				id, err := a.resolveID(ctx, "approval", pos[0])
				if err != nil {
					return err
				}
				var ap approvals.Approval
				if done, err := a.call(ctx, "approvals delegate "+id, "POST", "/api/v1/approvals/"+url.PathEscape(id)+"/delegate", nil,
					map[string]any{"to": *to, "reason": *reason}, &ap); done {
					return err
				}
				fmt.Fprintf(a.stdout, "approval %s is handed to %s; who may decide it now: %s\n", ap.ID, *to, strings.Join(ap.Eligible, ", "))
				return nil
			}
		}}
}

// cmdPolicy is `opsgate policy show`: the policy in force on the server.
func cmdPolicy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	subs := []adminSub{{name: "show", summary: "the policy in force, rule by rule",
		about: "Shows the policy the server judges with now (after its last reload): each rule with its number —\n" +
			"the one approvals name as the rule that asked — what it matches, its condition, effect, approvers\n" +
			"and quorum, then the default.",
		flags: func(fs *flagSet) func(context.Context, *adminCall, []string) error {
			return func(ctx context.Context, a *adminCall, _ []string) error {
				var p api.PolicyView
				if done, err := a.call(ctx, "policy show", "GET", "/api/v1/policy", nil, nil, &p); done {
					return err
				}
				fmt.Fprintf(a.stdout, "policy %s: %d rules; a deny is final, else the last matching rule wins\n\n", p.Version, len(p.Rules))
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "#\tACTION\tMATCHES\tWHEN\tAPPROVERS\tQUORUM\tWHAT FOR")
				for _, r := range p.Rules {
					match := "tool " + orStar(r.Tool)
					for _, k := range slices.Sorted(maps.Keys(r.Args)) {
						match += " " + k + "=" + r.Args[k]
					}
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Index, r.Action, match, orDash(r.When),
						orDash(strings.Join(r.Approvers, ", ")), strings.Trim(string(r.Quorum), `"`), r.Summary)
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "\ndefault: %s (approvers %s)\n", p.Default, orDash(strings.Join(p.DefaultApprovers, ", ")))
				return nil
			}
		}}}
	return runAdmin(ctx, "policy", "Show the policy in force on the server.", subs, args, stdout, stderr)
}

func orStar(s string) string {
	if s == "" {
		return "*"
	}
	return s
}
