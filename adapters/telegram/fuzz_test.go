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
			for _, a := range attachmentsOf(m) {
				if a.Ref == "" || !a.Kind.Valid() {
					t.Fatalf("attachment %+v without a ref or a kind", a)
				}
			}
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
