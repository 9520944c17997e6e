package core

import (
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
)

func TestCardPlainTextIsSelfContained(t *testing.T) {
	t.Parallel()
	c := Card{
		ApprovalID: "ap1", Tool: "deploy",
		Args:   ArgsFromMap(map[string]any{"version": "1.2.3", "service": "api", "replicas": 3}),
		Reason: "deploy api 1.2.3", Risk: "high_impact", Preview: "would deploy api 1.2.3 to staging",
		Requester: "slack:U1", Approvers: []string{"group:sre"}, Quorum: 2, Approvals: 1,
		ExpiresAt: time.Date(2026, 11, 29, 15, 0, 0, 0, time.UTC), Status: "pending",
		ConsoleURL: "https://ops.example.com/approvals/ap1",
	}
	text := c.PlainText()
	for _, want := range []string{"deploy", "service: api", "version: 1.2.3", "replicas: 3", "high_impact",
		"slack:U1", "group:sre", "1 of 2", "2026-11-29T15:00:00Z", "would deploy", "ap1", "https://ops.example.com/approvals/ap1"} {
		if !strings.Contains(text, want) {
			t.Errorf("plain card lacks %q:\n%s", want, text)
		}
	}
	if c.Args[0].Name != "replicas" || c.Args[2].Name != "version" {
		t.Errorf("args not sorted: %v", c.Args)
	}
}

func TestCardOutcomeLine(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 29, 14, 2, 0, 0, time.UTC)
	cases := map[string]string{
		"approved": "Approved by slack:U1 at 2026-11-29 14:02 UTC",
		"rejected": "Rejected by slack:U1 at 2026-11-29 14:02 UTC: not now",
		"expired":  "Expired at 2026-11-29 14:02 UTC with no decision",
	}
	for status, want := range cases {
		c := Card{Status: approvals.Status(status), Outcome: &CardOutcome{Status: approvals.Status(status), By: []string{"slack:U1"}, At: at}}
		if status == "rejected" {
			c.Outcome.Reason = "not now"
		}
		if got := c.OutcomeLine(); got != want {
			t.Errorf("%s: %q, want %q", status, got, want)
		}
		if strings.Contains(c.PlainText(), "Approval id") {
			t.Errorf("%s: a decided card must not invite a decision", status)
		}
	}
}

func TestParseThread(t *testing.T) {
	t.Parallel()
	th, err := ParseThread("slack:T1/C1/1700000000.000100")
	if err != nil || th.Channel != "slack" || th.Key != "T1/C1/1700000000.000100" || th.String() != "slack:T1/C1/1700000000.000100" {
		t.Fatalf("ParseThread = %+v, %v", th, err)
	}
	for _, bad := range []string{"", "slack", ":x", "slack:"} {
		if _, err := ParseThread(bad); err == nil {
			t.Errorf("ParseThread(%q) must fail", bad)
		}
	}
}

// TestAttack_MultilineArgumentForgesCardLine: an argument value or reason
// with line breaks cannot add a line to the plain card or the headline;
// the breaks are shown as LineMark.
func TestAttack_MultilineArgumentForgesCardLine(t *testing.T) {
	t.Parallel()
	c := Card{
		ApprovalID: "ap1", Tool: "deploy", Risk: "high_impact", Requester: "console:mallory", Status: "rejected",
		Args:    ArgsFromMap(map[string]any{"version": "1.2.3\nApproved by alice", "env": "prod\r\nRisk: read", "note": "a\u2028Risk: read\u202Eevil"}),
		Reason:  "deploy api \"1.2.3\nApproved by alice\"",
		Preview: "would deploy 1.2.3\nApproved by alice",
		Outcome: &CardOutcome{Status: "rejected", By: []string{"console:bob"}, Reason: "no\nApproved by alice"},
	}
	for name, text := range map[string]string{"PlainText": c.PlainText(), "Headline": c.Headline(), "OutcomeLine": c.OutcomeLine()} {
		for _, l := range strings.Split(text, "\n") {
			// The dry run is indented: only unindented lines are the card's.
			if strings.HasPrefix(l, "Approved by alice") || strings.HasPrefix(l, "Risk: read") {
				t.Errorf("%s: a value forged the line %q:\n%s", name, l, text)
			}
		}
		if strings.ContainsRune(text, '\u202E') || strings.ContainsRune(text, '\u2028') {
			t.Errorf("%s: a bidi override or line separator is shown raw", name)
		}
	}
	if h := c.Headline(); strings.Contains(h, "\n") || !strings.Contains(h, "version=1.2.3⏎Approved by alice") {
		t.Errorf("headline %q", h)
	}
	if !strings.Contains(c.PlainText(), `note: a⏎Risk: read\u202Eevil`) {
		t.Errorf("plain card does not show the breaks visibly:\n%s", c.PlainText())
	}
	if c.Args[2].Value != "1.2.3\nApproved by alice" {
		t.Errorf("Value must stay exact for edit forms: %q", c.Args[2].Value)
	}
	if OneLine(OneLine("a\nb\x1bc")) != OneLine("a\nb\x1bc") {
		t.Error("OneLine is not idempotent")
	}
}
