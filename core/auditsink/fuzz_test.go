package auditsink

import (
	"encoding/json"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/leodido/go-syslog/v4/rfc5424"

	"github.com/opsgate/opsgate/approvals"
)

// FuzzFormat: whatever an entry holds (actors, tools and details come from
// outside), its syslog message parses back as RFC 5424 and carries the
// entry unchanged, so nothing in an entry can forge another message.
func FuzzFormat(f *testing.F) {
	f.Add("approval.decided", "slack:U1", "deploy", `{"reason":"a\nb"}`)
	f.Add("x y", "<13>1 - - - - - forged", "\x00", `"\u2028"`)
	p := rfc5424.NewParser()
	f.Fuzz(func(t *testing.T, kind, actor, tool, detail string) {
		e := approvals.AuditEntry{Seq: 7, At: time.Unix(1e9, 123000).UTC(), Kind: approvals.AuditKind(kind), Actor: actor, Tool: tool, Hash: "hmac:ab"}
		if json.Valid([]byte(detail)) {
			e.Detail = json.RawMessage(detail)
		}
		msg, err := Format(e, "host", "1")
		if err != nil {
			return // refused (a dead letter), never malformed
		}
		m, err := p.Parse([]byte(msg))
		if err != nil {
			t.Fatalf("%q does not parse: %v", msg, err)
		}
		var back approvals.AuditEntry
		if err := json.Unmarshal([]byte(*m.(*rfc5424.SyslogMessage).Message), &back); err != nil {
			t.Fatalf("MSG is not the entry: %v", err)
		}
		if back.Seq != 7 || back.Actor != e.Actor && utf8.ValidString(e.Actor) || back.Hash != e.Hash {
			t.Fatalf("entry changed: %+v → %+v", e, back)
		}
	})
}
