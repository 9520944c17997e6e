package web

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/history"
)

// TestAuditReadsAsSentences: the audit page shows each entry as a
// sentence, with the raw entry one click away, and exports the log as CSV
// and JSON Lines; the run page's timeline is in words, with the time
// between events and where the time went.
func TestAuditReadsAsSentences(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	c := newClient(t, b.url)
	c.signIn(adminToken)
	b.send(t, "hist", "deploy api 1.2.3")
	run, ap := b.waitPending(t, "console:hist")
	if _, err := b.eng.Decide(context.Background(), core.Actor{ID: "slack:U1"}, "slack", core.Decision{ApprovalID: ap.ID, Action: "reject",
		Reason: "not during the freeze"}); err != nil {
		t.Fatal(err)
	}
	b.waitRun(t, run.ID, core.RunRejected)
	const sentence = "slack:U1 rejected deploy env=staging service=api version=1.2.3: not during the freeze"

	page := c.do("GET", "/audit", nil, nil)
	if page.status != 200 {
		t.Fatalf("GET /audit: %d", page.status)
	}
	for _, want := range []string{sentence, "console:bob asked to run deploy env=staging service=api version=1.2.3; group:sre to decide",
		"<details class=\"detail\"><summary>JSON", "&#34;kind&#34;: &#34;approval.decided&#34;", "/audit/export?format=csv", "/audit/export?format=jsonl"} {
		if !strings.Contains(page.body, want) {
			t.Fatalf("audit page lacks %q:\n%s", want, page.body)
		}
	}

	csvDoc := c.do("GET", "/audit/export?format=csv&run="+run.ID, nil, nil)
	if csvDoc.status != 200 || !strings.HasPrefix(csvDoc.header.Get("Content-Type"), "text/csv") ||
		!strings.Contains(csvDoc.header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("csv export: %d %v", csvDoc.status, csvDoc.header)
	}
	rows, err := csv.NewReader(strings.NewReader(csvDoc.body)).ReadAll()
	if err != nil {
		t.Fatalf("csv: %v\n%s", err, csvDoc.body)
	}
	found := false
	for _, r := range rows[1:] {
		found = found || (r[2] == "approval.decided" && r[7] == sentence && r[4] == run.ID)
		if r[4] != run.ID {
			t.Fatalf("the run filter let through %q", r)
		}
	}
	if strings.Join(rows[0], ",") != strings.Join(history.ExportColumns, ",") || !found {
		t.Fatalf("csv rows %q", rows)
	}

	jl := c.do("GET", "/audit/export?format=jsonl", nil, nil)
	sc := bufio.NewScanner(strings.NewReader(jl.body))
	var seqs []float64
	found = false
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("jsonl line %q: %v", sc.Text(), err)
		}
		seqs = append(seqs, m["seq"].(float64))
		found = found || m["sentence"] == sentence
	}
	if !found || len(seqs) < 2 {
		t.Fatalf("jsonl export:\n%s", jl.body)
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Fatalf("export not oldest first: %v", seqs)
		}
	}
	if r := c.do("GET", "/audit/export?format=xlsx", nil, nil); r.status != 400 {
		t.Fatalf("unknown format: %d", r.status)
	}

	rp := c.do("GET", "/runs/"+run.ID, nil, nil).body
	for _, want := range []string{"queued: deploy env=staging service=api version=1.2.3", "started",
		"asked for approval to run deploy env=staging service=api version=1.2.3 (high_impact); group:sre to decide",
		"rejected by slack:U1", "the run was rejected: not during the freeze", "Where the time went", "waiting for approval", `class="ev-gap">&#43;`} {
		if !strings.Contains(rp, want) {
			t.Fatalf("run page lacks %q:\n%s", want, rp)
		}
	}
	if strings.Contains(rp, "step index") {
		t.Fatal("the run page still says \"step index\"")
	}
}
