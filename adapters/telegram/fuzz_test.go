package telegram

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseUpdate feeds arbitrary bodies to the update parser and the
// normalization after it: nothing may panic, and whatever parses must
// yield a thread key that parses back to itself.
func FuzzParseUpdate(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"update_id":1}`))
	f.Add([]byte(`{"update_id":1,"message":{"message_id":1,"chat":{"id":-1},"text":"/ops@x"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := parseUpdate(b)
		if err != nil {
			return
		}
		for _, m := range []*tgMessage{u.Message, msgOf(u.CallbackQuery)} {
			if m == nil {
				continue
			}
			k := keyOf(m)
			back, err := parseThreadKey(k.String())
			if err != nil || back != k {
				t.Fatalf("key %q does not round-trip: %+v %v", k.String(), back, err)
			}
			_, _ = commandText(m, "opsbot")
			if m.ReplyToMessage != nil {
				_, _ = promptRef(m.ReplyToMessage.Text)
			}
		}
	})
}

func msgOf(q *tgCallbackQuery) *tgMessage {
	if q == nil {
		return nil
	}
	return q.Message
}

// FuzzDecodePayload checks that callback_data decoding never panics, never
// accepts anything it did not sign, and round-trips what it did.
func FuzzDecodePayload(f *testing.F) {
	key := buttonKey(testToken)
	for _, id := range []string{"0b9a4a52-9b8e-4f7e-9d0c-3c1f5f7e2a11", "ap-1"} {
		s, _ := encodePayload(key, payload{Action: actApprove, ApprovalID: id})
		f.Add(s)
	}
	f.Add("a.b")
	f.Add("uAAAAAAAAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAA")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := decodePayload(key, s)
		if err != nil {
			return
		}
		again, err := encodePayload(key, p)
		if err != nil {
			t.Fatalf("decoded %q to %+v, which does not encode: %v", s, p, err)
		}
		if again != s {
			t.Fatalf("%q verified but is not what we would sign (%q)", s, again)
		}
	})
}
