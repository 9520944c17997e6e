package router

import (
	"errors"
	"maps"
	"strings"
	"testing"
)

func setup(t *testing.T) *Router {
	t.Helper()
	r, err := New([]Flow{
		{Name: "deploy", Description: "Deploy a version", Command: "deploy {service} {version} {env=staging}"},
		{Name: "rollback", Description: "Roll back", Command: "deploy rollback {service}"},
		{Name: "status", Description: "Show service status", Command: "status {service}"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRoute(t *testing.T) {
	t.Parallel()
	r := setup(t)
	cases := map[string]struct {
		text string
		want Route
	}{
		"Deploy":             {"deploy api 1.2.3", Route{Flow: "deploy", Args: map[string]string{"service": "api", "version": "1.2.3", "env": "staging"}}},
		"LeadingSlash":       {"/deploy api 1", Route{Flow: "deploy", Args: map[string]string{"service": "api", "version": "1", "env": "staging"}}},
		"MoreLiteralsFirst":  {"deploy rollback api", Route{Flow: "rollback", Args: map[string]string{"service": "api"}}},
		"FallsBackToGeneral": {"deploy rollback api prod", Route{Flow: "deploy", Args: map[string]string{"service": "rollback", "version": "api", "env": "prod"}}},
		"Status":             {"status web", Route{Flow: "status", Args: map[string]string{"service": "web"}}},
		"QuotedArgument":     {`status "web front"`, Route{Flow: "status", Args: map[string]string{"service": "web front"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := r.Route(tc.text)
			if err != nil {
				t.Fatalf("Route(%q): %v", tc.text, err)
			}
			if got.Flow != tc.want.Flow || !maps.Equal(got.Args, tc.want.Args) {
				t.Fatalf("Route(%q) = %+v, want %+v", tc.text, got, tc.want)
			}
		})
	}
}

func TestRouteNoMatch(t *testing.T) {
	t.Parallel()
	r := setup(t)
	cases := map[string]struct {
		text     string
		flow     string
		unknown  bool
		contains []string
		absent   []string
	}{
		"KnownCommandWrongArgs": {
			text: "deploy api", flow: "deploy",
			contains: []string{"usage: deploy <service> <version> [env=staging]", "usage: deploy rollback <service>"},
			absent:   []string{"status"},
		},
		"KnownCommandSlash": {text: "/status", flow: "status", contains: []string{"usage: status <service>"}},
		"TooManyArgs":       {text: "status a b", flow: "status", contains: []string{"usage: status <service>"}},
		"UnknownCommand": {
			text: "restart api", unknown: true,
			contains: []string{`unknown command "restart"`, "deploy <service> <version> [env=staging] — Deploy a version", "status <service> — Show service status"},
		},
		"Empty":             {text: "   ", unknown: true, contains: []string{"commands:"}, absent: []string{"unknown command"}},
		"UnterminatedQuote": {text: `deploy "api 1`, flow: "deploy", contains: []string{"unterminated double quote", "usage: deploy"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := r.Route(tc.text)
			var nm *NoMatchError
			if !errors.As(err, &nm) {
				t.Fatalf("Route(%q) = %+v, %v; want *NoMatchError", tc.text, got, err)
			}
			if !IsNoMatch(err) {
				t.Error("IsNoMatch = false")
			}
			if nm.Flow != tc.flow || nm.Unknown != tc.unknown || nm.Text != tc.text {
				t.Errorf("NoMatchError = %+v, want flow %q unknown %v", nm, tc.flow, tc.unknown)
			}
			msg := err.Error()
			for _, s := range tc.contains {
				if !strings.Contains(msg, s) {
					t.Errorf("message %q lacks %q", msg, s)
				}
			}
			for _, s := range tc.absent {
				if strings.Contains(msg, s) {
					t.Errorf("message %q should not contain %q", msg, s)
				}
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	cases := map[string][]Flow{
		"EmptyName":    {{Name: "", Command: "x"}},
		"Duplicate":    {{Name: "a", Command: "a"}, {Name: "a", Command: "b"}},
		"BadPattern":   {{Name: "a", Command: "{x}"}},
		"EmptyPattern": {{Name: "a", Command: ""}},
	}
	for name, flows := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if _, err := New(flows); err == nil {
				t.Fatal("New succeeded, want error")
			}
		})
	}
	if _, err := New([]Flow{{Name: "a", Command: "{x}"}}); !errors.Is(err, ErrPattern) {
		t.Errorf("bad pattern error %v does not wrap ErrPattern", err)
	}
}

func TestEmptyRouterHelp(t *testing.T) {
	t.Parallel()
	r, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Route("anything")
	if err == nil || !strings.Contains(err.Error(), "no commands are configured") {
		t.Fatalf("err = %v", err)
	}
	if len(r.Flows()) != 0 {
		t.Error("Flows() not empty")
	}
}

func TestFlowsKeepsConfigOrder(t *testing.T) {
	t.Parallel()
	r := setup(t)
	var names []string
	for _, f := range r.Flows() {
		names = append(names, f.Name)
	}
	if strings.Join(names, ",") != "deploy,rollback,status" {
		t.Fatalf("Flows() order = %v", names)
	}
}

// TestHelpIsACommand: "help" lists the flows without calling itself
// unknown; "help deploy" gives that command's usages; a flow named help
// wins over the built-in.
func TestHelpIsACommand(t *testing.T) {
	t.Parallel()
	r := setup(t)
	for text, want := range map[string][]string{
		"help":           {"commands:", "deploy <service> <version> [env=staging] — Deploy a version", "status <service>"},
		"HELP":           {"commands:"},
		"/help":          {"commands:"},
		"?":              {"commands:"},
		"help deploy":    {"usage: deploy <service> <version> [env=staging] — Deploy a version", "usage: deploy rollback <service> — Roll back"},
		"help frobulate": {`no command "frobulate"`, "commands:"},
	} {
		_, err := r.Route(text)
		var nm *NoMatchError
		if !errors.As(err, &nm) || !nm.Asked || nm.Unknown {
			t.Fatalf("Route(%q) = %v; want a help answer", text, err)
		}
		for _, w := range want {
			if !strings.Contains(nm.Error(), w) {
				t.Errorf("Route(%q) = %q, lacks %q", text, nm.Error(), w)
			}
		}
		if strings.Contains(nm.Error(), "unknown command") {
			t.Errorf("Route(%q) calls help unknown: %q", text, nm.Error())
		}
	}
	own, err := New([]Flow{{Name: "help", Command: "help {topic}"}})
	if err != nil {
		t.Fatal(err)
	}
	if rt, err := own.Route("help deploys"); err != nil || rt.Flow != "help" {
		t.Fatalf("a flow named help: %+v, %v", rt, err)
	}
}

// TestTypoGetsDidYouMean: a command word an edit or two from a flow's gets
// the suggestion; a word far from every command gets none.
func TestTypoGetsDidYouMean(t *testing.T) {
	t.Parallel()
	r := setup(t)
	for text, want := range map[string]string{
		"deplyo api 1.2.3": "deploy", // swapped letters
		"depoy api 1":      "deploy", // one missing
		"Deploi api 1":     "deploy",
		"stauts web":       "status",
		"statsu web":       "status",
		"frobnicate now":   "",
		"de api":           "",
		"x":                "",
	} {
		_, err := r.Route(text)
		var nm *NoMatchError
		if !errors.As(err, &nm) || !nm.Unknown {
			t.Fatalf("Route(%q) = %v; want an unknown command", text, err)
		}
		if nm.Suggestion != want {
			t.Errorf("Route(%q) suggests %q, want %q", text, nm.Suggestion, want)
		}
		if want != "" && !strings.Contains(nm.Error(), "did you mean `"+want+"`?") {
			t.Errorf("Route(%q) = %q, lacks the suggestion", text, nm.Error())
		}
		if !strings.Contains(nm.Error(), "commands:") {
			t.Errorf("Route(%q) = %q, lacks the flow list", text, nm.Error())
		}
	}
}

func TestEditDistance(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"deploy", "deploy", 0}, {"deplyo", "deploy", 1}, {"depoy", "deploy", 1}, {"kitten", "sitting", 3}, {"ab", "ba", 1}, {"é", "e", 1}} {
		if got := editDistance(c.a, c.b); got != c.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
	if editDistance(strings.Repeat("a", 100), "a") < 1000 {
		t.Error("long words are not bounded")
	}
}
