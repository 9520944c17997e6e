package router

import (
	"slices"
	"testing"
)

// TestAttack_WebhookLabelAddsArguments: an alert label is one value. Put
// into a command line as is, "HighCPU duration=720h" becomes two words and
// the second binds the optional duration (a 30-day silence); quoted with
// Quote it stays the one value it was, whatever it contains.
func TestAttack_WebhookLabelAddsArguments(t *testing.T) {
	t.Parallel()
	p, err := ParsePattern("silence {alertname} {reason=alert} {duration=1h}")
	if err != nil {
		t.Fatal(err)
	}
	for _, label := range []string{
		"HighCPU duration=720h",
		`HighCPU" duration="720h`,
		`HighCPU\" duration=720h`,
		"duration=720h",
		"HighCPU\nduration=720h",
		`a\`,
		"",
	} {
		args, ok := p.Match("silence " + Quote(label) + " " + Quote("by alertmanager"))
		if !ok {
			t.Fatalf("%q: quoted command did not match", label)
		}
		if args["alertname"] != label || args["reason"] != "by alertmanager" || args["duration"] != "1h" {
			t.Errorf("%q: args %q, want the label as alertname and duration left at 1h", label, args)
		}
	}
	// An "=" inside quotes is a value, not a binding; outside it binds.
	args, ok := p.Match(`silence x "duration=720h"`)
	if !ok || args["reason"] != "duration=720h" || args["duration"] != "1h" {
		t.Errorf("quoted name=value bound by name: %q", args)
	}
	args, ok = p.Match(`silence x duration="2h"`)
	if !ok || args["duration"] != "2h" {
		t.Errorf("name=\"value\" no longer binds: %q", args)
	}
}

// FuzzQuote: Quote(s) always reads back as exactly one token equal to s,
// also between other words.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"", "a b", `"`, `\`, `\"`, "x=y", "a\nb", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := Tokenize("cmd " + Quote(s) + " tail")
		if err != nil || !slices.Equal(got, []string{"cmd", s, "tail"}) {
			t.Fatalf("Quote(%q) = %s read back as %q, %v", s, Quote(s), got, err)
		}
		toks, _ := tokenize(Quote(s))
		if len(toks) != 1 || toks[0].eq != -1 {
			t.Fatalf("Quote(%q) binds by name: %+v", s, toks)
		}
	})
}
