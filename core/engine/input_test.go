package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/markdown"
	"github.com/opsgate/opsgate/core/tools"
)

// withFileTool adds a read-risk "cat" tool with a path argument: denied
// under /etc, allowed under /srv, asked everywhere else.
func withFileTool(cat *recorder) func(*Options) {
	return func(o *Options) {
		o.Tools = append(o.Tools, &tools.Tool{Name: "cat", Risk: approvals.RiskRead, Runner: cat})
		o.Flows = append(o.Flows, Flow{Name: "cat", Command: "cat {path}", Steps: []FlowStep{{Tool: "cat", Args: map[string]any{"path": "{{.path}}"}}}})
		o.Policy.Rules = append(o.Policy.Rules,
			approvals.Rule{Tool: "cat", Effect: approvals.EffectAsk, Approvers: []string{"group:sre"}},
			approvals.Rule{Tool: "cat", Args: map[string]string{"path": "/srv/*"}, Effect: approvals.EffectAllow},
			approvals.Rule{Tool: "cat", Args: map[string]string{"path": "/etc/*"}, Effect: approvals.EffectDeny},
		)
	}
}

// TestAttack_DotSegmentBypassesDeny: "/./etc/x", "//etc/x" and
// "/srv/../etc/x" are /etc/x to the program, so the deny on /etc/* stops
// them; a walk out of /srv does not ride the /srv allow; and what the tool
// receives is the cleaned path the policy judged.
func TestAttack_DotSegmentBypassesDeny(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		cat := &recorder{name: "cat"}
		h := setup(t, b, withFileTool(cat))
		for i, p := range []string{"/./etc/shadow", "//etc/shadow", "/etc/../etc/shadow", "/srv/../etc/shadow", "/srv/app/../../etc/shadow"} {
			rc := h.send("console:req", "console:dots"+string(rune('a'+i)), "cat "+p)
			run := h.waitRun(rc.RunID, core.RunFailed, core.RunSucceeded, core.RunWaitingApproval)
			if run.Status != core.RunFailed || run.ErrorCode != "denied" {
				t.Errorf("cat %s: %s %s, want denied", p, run.Status, run.ErrorCode)
			}
		}
		if n := cat.total(); n != 0 {
			t.Fatalf("a path under /etc reached the tool %d times", n)
		}

		// Out of /srv but not into /etc: the allow on /srv/* no longer
		// matches, so it asks, and the card shows where it really goes.
		rc := h.send("console:req", "console:walk", "cat /srv/../home/alice/.ssh/id_rsa")
		a := h.waitApproval(rc.RunID)
		if got := a.ProposedArgs["path"]; got != "/home/alice/.ssh/id_rsa" {
			t.Fatalf("card shows %q, want the cleaned path", got)
		}

		// Inside /srv it is allowed, and the tool gets the cleaned form.
		rc = h.send("console:req", "console:srv", "cat /srv/./app//logs/")
		h.waitRun(rc.RunID, core.RunSucceeded)
		if calls := cat.callsFor(rc.RunID); len(calls) != 1 || calls[0].Args["path"] != "/srv/app/logs/" {
			t.Fatalf("tool got %+v, want /srv/app/logs/", calls)
		}

		// An edit is cleaned the same way, so it cannot reach /etc either.
		_, err := h.decide("console:alice", a.ID, "edit", func(d *core.Decision) { d.Args = map[string]any{"path": "/srv/.././etc/shadow"} })
		if de := decisionCode(t, err); de.Code != core.DecisionDenied {
			t.Fatalf("edit into /etc via dots: %+v, want denied_by_policy", de)
		}
	})
}

// TestAttack_ExecOptionInjection: a value that starts an argv element with
// "-" is refused as invalid arguments before any card is posted or dry run
// started, not after an approver said yes.
func TestAttack_ExecOptionInjection(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		x := &tools.Exec{Command: []string{"/bin/echo", "{{.ref}}"}, DryRun: []string{"/bin/echo", "--dry-run", "{{.ref}}"}}
		h := setup(t, b, func(o *Options) {
			o.Tools = append(o.Tools, &tools.Tool{Name: "checkout", Risk: approvals.RiskHighImpact, Runner: x})
			o.Flows = append(o.Flows, Flow{Name: "checkout", Command: "checkout {ref}", Steps: []FlowStep{{Tool: "checkout", Args: map[string]any{"ref": "{{.ref}}"}}}})
			o.Policy.Rules = append(o.Policy.Rules, approvals.Rule{Tool: "checkout", Effect: approvals.EffectAsk, Approvers: []string{"group:sre"}})
		})
		rc := h.send("console:req", "console:opt", "checkout --upload-pack=touch${IFS}/tmp/pwned")
		run := h.waitRun(rc.RunID, core.RunFailed, core.RunWaitingApproval, core.RunSucceeded)
		if run.Status != core.RunFailed || run.ErrorCode != "invalid_args" || !strings.Contains(run.ErrorMessage, "allow_dash_args") {
			t.Fatalf("run %s %s %q, want invalid_args naming the opt-in", run.Status, run.ErrorCode, run.ErrorMessage)
		}
		items, _, err := h.store.ApprovalList(context.Background(), approvals.ApprovalListParams{RunID: run.ID, Limit: 10})
		if err != nil || len(items) != 0 {
			t.Fatalf("an approval was created for a refused call: %v %v", items, err)
		}
		rc = h.send("console:req", "console:opt2", "checkout v1.2.3")
		a := h.waitApproval(rc.RunID)
		if a.Preview != "--dry-run v1.2.3\n" {
			t.Fatalf("preview %q", a.Preview)
		}
		// An edit into an option is refused with 422 like any invalid value.
		_, err = h.decide("console:alice", a.ID, "edit", func(d *core.Decision) { d.Args = map[string]any{"ref": "-rf"} })
		if de := decisionCode(t, err); de.Code != core.DecisionInvalidArgs {
			t.Fatalf("edit into an option: %+v, want invalid_args", de)
		}
	})
}

// TestAttack_FeedbackBecomesLiveLink: an approver's reject reason, or a
// stranger's unknown command, quoted in a reply is text on every platform:
// no masked link, no <url|text>, no mention, and no forged second line.
func TestAttack_FeedbackBecomesLiveLink(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		h := setup(t, b)
		rc := h.send("console:req", "console:fb", "deploy api 1.2.3")
		a := h.waitApproval(rc.RunID)
		feedback := "not now, see [the runbook](https://evil.example/x) <https://evil.example|here> <!channel> @everyone\n✅ deploy succeeded (run 1)."
		if _, err := h.decide("console:alice", a.ID, "reject", func(d *core.Decision) { d.Reason = feedback }); err != nil {
			t.Fatal(err)
		}
		h.waitRun(rc.RunID, core.RunRejected)
		texts := h.outboxTexts(rc.RunID)
		if len(texts) != 1 {
			t.Fatalf("replies %q", texts)
		}
		unknown := h.send("console:mallory", "console:fb2", "[click](https://evil.example) please")
		if unknown.RunID != "" {
			t.Fatal("an unknown command started a run")
		}
		items, _, err := h.store.OutboxList(context.Background(), core.OutboxListParams{Status: core.DeliveryPending, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range items {
			if m.Thread.Key == "fb2" {
				texts = append(texts, m.Text)
			}
		}
		if len(texts) != 2 {
			t.Fatalf("want the rejection and the no-match reply, got %q", texts)
		}
		if strings.Contains(texts[0], "\n") {
			t.Errorf("feedback forged a line in the reply: %q", texts[0])
		}
		for _, text := range texts {
			// Every platform's renderer makes links only from Link nodes
			// and escapes text (adaptertest.Hostile covers <!channel>,
			// @everyone and HTML per adapter): no Link, no live link.
			if hasLink(markdown.Parse(text)) {
				t.Errorf("reply %q parses with a link", text)
			}
			if got := markdown.Convert(text, markdown.Plain); !strings.Contains(got, "https://evil.example") {
				t.Errorf("the words themselves were lost: %q", got)
			}
		}
	})
}

// hasLink reports whether the parsed reply has a Link node anywhere.
func hasLink(n *markdown.Node) bool {
	if n.Kind == markdown.Link {
		return true
	}
	for _, c := range n.Children {
		if hasLink(c) {
			return true
		}
	}
	return false
}
