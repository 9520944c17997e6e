package local

import (
	"strings"
	"testing"

	"github.com/opsgate/opsgate/approvals"
)

// FuzzParse: any body is a clear refusal (*reqError with a 4xx status and
// a code) or a request whose every value is within bounds; never a panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"thread":"local:dev","text":"deploy api 1.2.3"}`))
	f.Add([]byte(`{"thread":"dev","approval_id":"a1","action":"edit","args":{"v":1},"reason":"r","scope":"session"}`))
	f.Add([]byte(`{"thread":"a\u0000b","text":"x"}`))
	f.Add([]byte(`[1,2]`))
	f.Add([]byte(`{"thread":"x","text":"a"}{"x":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(err error) {
			if err == nil {
				return
			}
			re, ok := err.(*reqError)
			if !ok || re.status < 400 || re.status > 499 || re.body.Code == "" || re.body.Message == "" {
				t.Fatalf("refusal %#v", err)
			}
		}
		m, th, err := ParseMessage(data)
		check(err)
		if err == nil {
			if th.Channel != Channel || th.Key == "" || len(th.Key) > MaxKey || strings.ContainsAny(th.Key, "\r\n\x00") ||
				strings.TrimSpace(m.Text) == "" || len(m.Text) > MaxText {
				t.Fatalf("accepted message %+v in %v", m, th)
			}
		}
		d, th, err := ParseDecision(data)
		check(err)
		if err == nil {
			a := approvals.Action(d.Action)
			if th.Channel != Channel || th.Key == "" || d.ApprovalID == "" || !a.Valid() || (a == approvals.ActionEdit) != (d.Args != nil) ||
				(d.Scope != "" && !approvals.Scope(d.Scope).Valid()) {
				t.Fatalf("accepted decision %+v in %v", d, th)
			}
		}
	})
}
