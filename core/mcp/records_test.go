package mcp

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

func TestRecords(t *testing.T) {
	t.Parallel()
	admin := connect(t, adminToken)
	agent := connect(t, agentToken)
	// A gated call is audited (approval.requested), and so is a cancel.
	mine := agent.mustOK("flow", map[string]any{"flowName": "deploy", "intent": "rec 1"}).obj("run")["id"].(string)
	theirs := admin.mustOK("flow", map[string]any{"flowName": "deploy", "intent": "rec 2"}).obj("run")["id"].(string)
	waitRun(t, mine, core.RunWaitingApproval)
	waitRun(t, theirs, core.RunWaitingApproval)
	agent.mustOK("cancel_run", map[string]any{"runId": mine})
	admin.mustOK("cancel_run", map[string]any{"runId": theirs})
	entry := func(runID string) approvals.AuditEntry {
		es, err := theEnv.store.AuditList(context.Background(), approvals.AuditListParams{RunID: runID, Limit: 10})
		if err != nil || len(es) == 0 {
			t.Fatalf("no audit entry for %s: %v", runID, err)
		}
		return es[0]
	}
	e := entry(mine)
	id := strconv.FormatInt(e.Seq, 10)
	rec := admin.mustOK("get_record", map[string]any{"recordId": id}).obj("record")
	if rec["kind"] != string(e.Kind) || rec["id"] != id || rec["hash"] != e.Hash || rec["run_id"] != mine || rec["detail"] == nil {
		t.Fatalf("record = %v", rec)
	}
	if r := admin.mustOK("get_record", map[string]any{"recordId": "999999999"}); r.out["record"] != nil {
		t.Fatalf("missing record = %v", r.out)
	}
	// A token confined to its own runs reads no audit log, not even its
	// runs' entries (core/authority, as over REST and in the console).
	other := strconv.FormatInt(entry(theirs).Seq, 10)
	for _, rid := range []string{id, other} {
		agent.mustErr("forbidden", "get_record", map[string]any{"recordId": rid})
	}
	if r := admin.mustOK("get_record", map[string]any{"recordId": other}); r.out["record"] == nil {
		t.Fatal("admin cannot see the record")
	}
}

func TestArtifacts(t *testing.T) {
	t.Parallel()
	c := connect(t, readerToken)
	var ids []string
	for i := range 5 {
		id := c.mustOK("flow", map[string]any{"flowName": "status", "intent": fmt.Sprintf("art%d", i)}).obj("run")["id"].(string)
		waitRun(t, id, core.RunSucceeded)
		ids = append(ids, id)
	}
	a := c.mustOK("get_artifact", map[string]any{"artifactId": ids[0] + "/status"}).obj("artifact")
	if a["content"] != "api is green" || a["media_type"] != "text/plain" || a["stage"] != "status" || a["flow"] != "status" {
		t.Fatalf("artifact = %v", a)
	}
	if r := c.mustOK("get_artifact", map[string]any{"artifactId": ids[0] + "/nope"}); r.out["artifact"] != nil {
		t.Fatal(r.out)
	}
	if r := c.mustOK("get_artifact", map[string]any{"artifactId": "no-such-run/status"}); r.out["artifact"] != nil {
		t.Fatal(r.out)
	}
	newest := c.mustOK("get_artifact", map[string]any{"flowName": "status", "stageName": "status"}).obj("artifact")
	if newest["run_id"] == nil {
		t.Fatal(newest)
	}
	if r := c.mustOK("get_artifact", map[string]any{"flowName": "status", "stageName": "nope"}); r.out["artifact"] != nil {
		t.Fatal(r.out)
	}
	c.mustErr("invalid_input", "get_artifact", map[string]any{"flowName": "status"})
	c.mustErr("invalid_input", "get_artifact", map[string]any{"artifactId": "x/y", "flowName": "status"})
	// Paging: 2 at a time, no artifact twice, metadata only.
	seen := map[string]bool{}
	cursor := ""
	for pages := 0; pages < 100; pages++ {
		args := map[string]any{"flowName": "status", "stageName": "status", "limit": 2}
		if cursor != "" {
			args["cursor"] = cursor
		}
		r := c.mustOK("list_artifacts", args)
		items := r.out["artifacts"].([]any)
		if len(items) > 2 {
			t.Fatalf("page of %d", len(items))
		}
		for _, it := range items {
			m := it.(map[string]any)
			if seen[m["id"].(string)] {
				t.Fatalf("artifact %s twice", m["id"])
			}
			if _, ok := m["content"]; ok {
				t.Fatal("lists carry metadata only")
			}
			seen[m["id"].(string)] = true
		}
		cursor, _ = r.out["next_cursor"].(string)
		if cursor == "" {
			break
		}
	}
	for _, id := range ids {
		if !seen[id+"/status"] {
			t.Fatalf("artifact of %s not listed (%d seen)", id, len(seen))
		}
	}
	c.mustErr("invalid_input", "list_artifacts", map[string]any{"cursor": "!!"})
	// Own-only tokens list only their own.
	for _, it := range connect(t, agentToken).mustOK("list_artifacts", map[string]any{"limit": 100}).out["artifacts"].([]any) {
		r, _ := theEnv.store.RunGet(context.Background(), it.(map[string]any)["run_id"].(string))
		if r.Requester != "agent:claude" {
			t.Fatalf("agent lists %v", it)
		}
	}
}
