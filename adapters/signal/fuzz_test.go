package signal

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/core"
)

func asRate(err error, rl **core.RateLimitError) bool { return errors.As(err, rl) }

func FuzzParseReceive(f *testing.F) {
	for _, n := range []string{"receive_dm.json", "receive_group.json", "receive_reaction.json", "receive_quote.json", "receive_sync.json", "receive_typing.json", "receive_attachment.json", "receive_group_photo.json"} {
		b, err := os.ReadFile("testdata/" + n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(strings.ReplaceAll(string(b), "TARGET", "1700000000000")))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rv, err := parseReceive(b)
		if err != nil {
			return
		}
		e := rv.Envelope
		if !ValidIdentity(e.sender()) || e.Timestamp <= 0 {
			t.Fatalf("accepted envelope with sender %q ts %d", e.sender(), e.Timestamp)
		}
		if d := e.DataMessage; d != nil {
			for _, a := range attachmentsOf(threadKey{User: e.sender()}, d) {
				if k, id, err := parseAttachmentRef(a.Ref); err != nil || k.User != e.sender() || id == "" {
					t.Fatalf("attachment ref %q does not round-trip: %v", a.Ref, err)
				}
			}
		}
	})
}

func FuzzParseDecision(f *testing.F) {
	for _, s := range []string{"approve ABCD", "reject ABCD: no", "reject: no", `edit ABCD {"a":1}`, "approve", "approve now", "deploy"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := parseDecision(s)
		if !ok {
			return
		}
		if d.Code != "" && !validCode(d.Code) {
			t.Fatalf("code %q from %q", d.Code, s)
		}
		if d.Action == "edit" && (d.Args == nil) == (d.Problem == "") {
			t.Fatalf("edit %q: %+v", s, d)
		}
	})
}

func TestParseDecision(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]decisionText{
		"approve ABCD":             {Action: "approve", Code: "ABCD"},
		"Approve":                  {Action: "approve"},
		"reject ABCD: too risky":   {Action: "reject", Code: "ABCD", Reason: "too risky"},
		"reject: not now":          {Action: "reject", Reason: "not now"},
		"reject ABCD":              {Action: "reject", Code: "ABCD"},
		"reject because of freeze": {Action: "reject", Reason: "because of freeze"},
	} {
		got, ok := parseDecision(in)
		if !ok || got.Action != want.Action || got.Code != want.Code || got.Reason != want.Reason {
			t.Errorf("parseDecision(%q) = %+v, %v; want %+v", in, got, ok, want)
		}
	}
	for _, in := range []string{"approve it now", "deploy api", ""} {
		if _, ok := parseDecision(in); ok {
			t.Errorf("parseDecision(%q) took it for a decision", in)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	good := Config{DaemonURL: "http://127.0.0.1:8080", Account: "+15550009999", Groups: []string{opsGroup}}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*Config){
		"NoURL":      func(c *Config) { c.DaemonURL = "" },
		"BadURL":     func(c *Config) { c.DaemonURL = "127.0.0.1:8080" },
		"NoAccount":  func(c *Config) { c.Account = "" },
		"BadAccount": func(c *Config) { c.Account = "15550009999" },
		"BadGroup":   func(c *Config) { c.Groups = []string{"x"} },
	} {
		c := good
		mod(&c)
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
	for _, id := range []string{"+15551234567", "0f3b6d2e-6a1c-4c55-9d8e-2b7f1a4c9e01"} {
		if !ValidIdentity(id) {
			t.Errorf("ValidIdentity(%q) = false", id)
		}
	}
	for _, id := range []string{"15551234567", "+0123", "0F3B6D2E-6A1C-4C55-9D8E-2B7F1A4C9E01", "alice"} {
		if ValidIdentity(id) {
			t.Errorf("ValidIdentity(%q) = true", id)
		}
	}
}
