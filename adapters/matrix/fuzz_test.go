package matrix

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func FuzzParseEvent(f *testing.F) {
	f.Add([]byte(msgEvent("$a", "@alice:localhost", "!ops deploy api 1.2.3", "")))
	f.Add([]byte(`{"type":"m.reaction","event_id":"$b","sender":"@bob:localhost","content":{"m.relates_to":{"rel_type":"m.annotation","event_id":"$a","key":"✅"}}}`))
	f.Add([]byte(`{"type":"m.room.message","event_id":"$c","sender":"@x:y","content":{"msgtype":"m.text","body":"approve","m.relates_to":{"rel_type":"m.thread","event_id":"$a","m.in_reply_to":{"event_id":"$card"}}}}`))
	f.Add([]byte(`{"type":"m.room.message"}`))
	for _, name := range []string{"m_file_caption.json", "m_image.json", "m_file_encrypted.json"} {
		if b, err := os.ReadFile(filepath.Join("testdata", name)); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := parseEvent(b)
		if err != nil {
			return
		}
		if !eventIDRE.MatchString(ev.EventID) || !userIDRE.MatchString(ev.Sender) || len(ev.Content) == 0 {
			t.Fatalf("accepted an event without a valid envelope: %+v", ev)
		}
		if m, err := ev.message(); err == nil {
			if r := m.RelatesTo; r != nil && r.InReplyTo != nil && !eventIDRE.MatchString(r.InReplyTo.EventID) {
				t.Fatalf("accepted a reply to %q", r.InReplyTo.EventID)
			}
			_ = stripReplyFallback(m.Body)
			if a, ok := fileAttachment(m); ok && (!strings.HasPrefix(a.Ref, "mxc://") || !a.Kind.Valid()) {
				t.Fatalf("accepted a file %+v", a)
			}
		}
		if r, err := ev.reaction(); err == nil && (r.Key == "" || r.RelType != "m.annotation") {
			t.Fatalf("accepted a reaction %+v", r)
		}
	})
}

func FuzzParseSync(f *testing.F) {
	b, _ := json.Marshal(batch("!r:localhost", msgEvent("$a", "@alice:localhost", "!ops help", "")))
	f.Add(b)
	f.Add([]byte(`{"next_batch":"s1","rooms":{"invite":{"!r:x":{"invite_state":{"events":[{}]}}}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseSync(b)
		if err == nil && s.NextBatch == "" {
			t.Fatal("accepted a sync without next_batch")
		}
	})
}

func FuzzParseDecision(f *testing.F) {
	for _, s := range []string{"approve", "reject: not now", "REJECT", `edit {"version":"1.2.4"}`, "edit", "approve now", "deploy api"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := parseDecision(s)
		if !ok {
			return
		}
		switch d.Action {
		case "approve", "reject":
		case "edit":
			if (d.Args == nil) == (d.Problem == "") {
				t.Fatalf("edit %q: args %v and problem %q", s, d.Args, d.Problem)
			}
		default:
			t.Fatalf("unknown action %q from %q", d.Action, s)
		}
	})
}

func FuzzThreadKey(f *testing.F) {
	f.Add("!room:localhost/$event")
	f.Add("!room:localhost")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := parseThreadKey(s)
		if err != nil {
			return
		}
		back, err := parseThreadKey(k.String())
		if err != nil || back != k {
			t.Fatalf("%q → %+v → %q → %+v, %v", s, k, k.String(), back, err)
		}
		if strings.ContainsAny(string(k.Room), "/") && k.Root != "" && !strings.Contains(s, "/$") {
			t.Fatalf("odd split of %q", s)
		}
	})
}
