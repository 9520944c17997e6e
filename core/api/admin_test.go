package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

func TestAudit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	prev := ""
	for i := range 5 {
		e := approvals.AuditEntry{At: testNow, Kind: "approval.decided", Actor: "console:admin", Tool: "deploy", Detail: json.RawMessage(`{"i":1}`)}
		if i == 2 {
			e.Actor = "console:bob"
		}
		e.Seal(int64(i+1), prev)
		prev = e.Hash
		b.st.audit = append(b.st.audit, e)
	}
	t.Run("PagesByCursor", func(t *testing.T) {
		r := b.do(t, "GET", "/api/v1/audit?limit=2", adminToken, nil)
		want(t, r, 200, "")
		items := r.body["items"].([]any)
		if len(items) != 2 || r.body["next_cursor"] != "2" || items[0].(map[string]any)["hash"] == "" {
			t.Fatalf("page 1 %s", r.raw)
		}
		r = b.do(t, "GET", "/api/v1/audit?limit=2&cursor=4", adminToken, nil)
		if items := r.body["items"].([]any); len(items) != 1 || items[0].(map[string]any)["seq"] != 5.0 || r.body["next_cursor"] != "" {
			t.Fatalf("last page %s", r.raw)
		}
		r = b.do(t, "GET", "/api/v1/audit?after=1&actor=console:bob", adminToken, nil)
		if items := r.body["items"].([]any); len(items) != 1 || items[0].(map[string]any)["seq"] != 3.0 {
			t.Fatalf("actor filter %s", r.raw)
		}
		want(t, b.do(t, "GET", "/api/v1/audit?after=-1", adminToken, nil), 422, "invalid")
	})
	t.Run("Verify", func(t *testing.T) {
		b.st.mu.Lock()
		last := b.st.audit[len(b.st.audit)-1]
		b.st.mu.Unlock()
		r := b.do(t, "GET", "/api/v1/audit/verify", adminToken, nil)
		if r.status != 200 || r.body["ok"] != true || r.body["first_bad_seq"] != 0.0 || r.body["problem"] != nil {
			t.Fatalf("verify %s", r.raw)
		}
		// The head is served so operators can record it: a chain cannot
		// show that its newest entries were removed.
		if r.body["head_seq"] != float64(last.Seq) || r.body["head_hash"] != last.Hash || last.Hash == "" {
			t.Fatalf("verify head %s, want %d %s", r.raw, last.Seq, last.Hash)
		}
		b.st.mu.Lock()
		b.st.badSeq = 3
		b.st.mu.Unlock()
		r = b.do(t, "GET", "/api/v1/audit/verify", adminToken, nil)
		if r.status != 200 || r.body["ok"] != false || r.body["first_bad_seq"] != 3.0 || r.body["head_seq"] != float64(last.Seq) ||
			!strings.Contains(fmt.Sprint(r.body["problem"]), "entry 3 does not link to the entry before it") {
			t.Fatalf("verify %s", r.raw)
		}
	})
}

func TestDeliveries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i, st := range []core.DeliveryStatus{core.DeliveryDead, core.DeliverySent, core.DeliveryDead} {
		b.st.deliveries = append(b.st.deliveries, &core.Delivery{OutboxMessage: core.OutboxMessage{ID: "d" + string(rune('0'+i)),
			Thread: core.Thread{Channel: "slack", Key: "C1"}, Kind: core.KindReply, Text: "hi", CreatedAt: testNow}, Status: st, LastError: "boom"})
	}
	r := b.do(t, "GET", "/api/v1/deliveries?status=dead&limit=1", adminToken, nil)
	want(t, r, 200, "")
	items := r.body["items"].([]any)
	if c, _ := r.body["next_cursor"].(string); len(items) != 1 || items[0].(map[string]any)["thread"] != "slack:C1" || c == "" {
		t.Fatalf("dead %s", r.raw)
	}
	if refs, ok := items[0].(map[string]any)["refs"].([]any); !ok || len(refs) != 0 {
		t.Fatalf("refs of a message never sent: %s", r.raw)
	}
	b.st.deliveries[1].ChunksSent, b.st.deliveries[1].Refs = 1, []core.MessageRef{{Channel: "slack", ID: "C1/1712.0001"}}
	r = b.do(t, "GET", "/api/v1/deliveries?status=sent", adminToken, nil)
	want(t, r, 200, "")
	if items := r.body["items"].([]any); len(items) != 1 || fmt.Sprint(items[0].(map[string]any)["refs"]) != "[map[channel:slack id:C1/1712.0001]]" {
		t.Fatalf("sent %s: want its platform ref", r.raw)
	}
	want(t, b.do(t, "GET", "/api/v1/deliveries?status=lost", adminToken, nil), 422, "invalid")
	r = b.do(t, "POST", "/api/v1/deliveries/d0/requeue", adminToken, nil)
	if r.status != 200 || r.body["status"] != "pending" {
		t.Fatalf("requeue %s", r.raw)
	}
	want(t, b.do(t, "POST", "/api/v1/deliveries/d0/requeue", adminToken, nil), 409, "not_dead")
	want(t, b.do(t, "POST", "/api/v1/deliveries/zz/requeue", adminToken, nil), 404, "not_found")
}
