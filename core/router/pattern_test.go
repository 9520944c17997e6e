package router

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestParsePatternErrors(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		pattern string
		want    string
	}{
		"Empty":                 {"   ", "empty pattern"},
		"StartsWithPlaceholder": {"{service} deploy", "must start with a literal"},
		"UnclosedBrace":         {"deploy {service", "malformed placeholder"},
		"BraceInsideWord":       {"deploy x{service}", "malformed placeholder"},
		"NestedBraces":          {"deploy {{service}}", "malformed placeholder"},
		"EmptyName":             {"deploy {}", "empty name"},
		"EmptyNameWithDefault":  {"deploy {=x}", "empty name"},
		"BadNameChar":           {"deploy {ser.vice}", "name contains"},
		"Duplicate":             {"deploy {service} {service}", "duplicate placeholder"},
		"DuplicateOptional":     {"deploy {env=a} {env=b}", "duplicate placeholder"},
		"RequiredAfterOptional": {"deploy {env=staging} {service}", "required placeholder {service} after an optional"},
		"LiteralAfterOptional":  {"deploy {env=staging} now", "literal \"now\" after an optional"},
		"QuoteInLiteral":        {`deploy "x"`, "contains a quote"},
		"QuoteInDefault":        {`deploy {env="a"}`, "default contains a quote"},
		"TooManyWords":          {"x" + strings.Repeat(" y", maxPatternTokens), "more than"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, err := ParsePattern(tc.pattern)
			if err == nil {
				t.Fatalf("ParsePattern(%q) = %v, want error containing %q", tc.pattern, p, tc.want)
			}
			if !errors.Is(err, ErrPattern) {
				t.Errorf("error %v does not wrap ErrPattern", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestParsePatternShape(t *testing.T) {
	t.Parallel()
	p, err := ParsePattern("  deploy   {service} {version} {env=staging} {note=}")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.String(), "deploy {service} {version} {env=staging} {note=}"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := p.Usage(), "deploy <service> <version> [env=staging] [note=]"; got != want {
		t.Errorf("Usage() = %q, want %q", got, want)
	}
	if p.Command() != "deploy" {
		t.Errorf("Command() = %q", p.Command())
	}
	ph := p.Placeholders()
	if len(ph) != 4 || ph[0] != (Placeholder{Name: "service"}) || ph[2] != (Placeholder{Name: "env", Default: "staging", Optional: true}) {
		t.Errorf("Placeholders() = %+v", ph)
	}
}

func TestMatch(t *testing.T) {
	t.Parallel()
	p, err := ParsePattern("deploy {service} {version} {env=staging} {region=eu}")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		text string
		want map[string]string // nil: no match
	}{
		"RequiredOnlyDefaultsFilled": {"deploy api 1.2.3", map[string]string{"service": "api", "version": "1.2.3", "env": "staging", "region": "eu"}},
		"OptionalPositional":         {"deploy api 1.2.3 prod", map[string]string{"service": "api", "version": "1.2.3", "env": "prod", "region": "eu"}},
		"AllPositional":              {"deploy api 1 prod us", map[string]string{"service": "api", "version": "1", "env": "prod", "region": "us"}},
		"OptionalByName":             {"deploy api 1 region=us", map[string]string{"service": "api", "version": "1", "env": "staging", "region": "us"}},
		"ByNameThenPositional":       {"deploy api 1 region=us prod", map[string]string{"service": "api", "version": "1", "env": "prod", "region": "us"}},
		"ExtraWhitespace":            {"  deploy\tapi \n 1  ", map[string]string{"service": "api", "version": "1", "env": "staging", "region": "eu"}},
		"CaseInsensitiveLiteral":     {"Deploy api 1", map[string]string{"service": "api", "version": "1", "env": "staging", "region": "eu"}},
		"QuotedValue":                {`deploy "my api" 1`, map[string]string{"service": "my api", "version": "1", "env": "staging", "region": "eu"}},
		"QuotedEscapes":              {`deploy "a \"b\" \\" 1`, map[string]string{"service": `a "b" \`, "version": "1", "env": "staging", "region": "eu"}},
		"QuotedNamedValue":           {`deploy api 1 env="us east"`, map[string]string{"service": "api", "version": "1", "env": "us east", "region": "eu"}},
		"EmptyQuoted":                {`deploy "" 1`, map[string]string{"service": "", "version": "1", "env": "staging", "region": "eu"}},
		"RequiredEqualsIsPositional": {"deploy a=b 1", map[string]string{"service": "a=b", "version": "1", "env": "staging", "region": "eu"}},
		"MissingRequired":            {"deploy api", nil},
		"WrongLiteral":               {"rollback api 1", nil},
		"ExtraToken":                 {"deploy api 1 prod us extra", nil},
		"NamedTwice":                 {"deploy api 1 env=a env=b", nil},
		"UnterminatedQuote":          {`deploy "api 1`, nil},
		"Empty":                      {"", nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, ok := p.Match(tc.text)
			if tc.want == nil {
				if ok {
					t.Fatalf("Match(%q) = %v, want no match", tc.text, got)
				}
				return
			}
			if !ok || !maps.Equal(got, tc.want) {
				t.Fatalf("Match(%q) = %v, %v; want %v", tc.text, got, ok, tc.want)
			}
		})
	}
}

func TestTokenize(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		text string
		want []string
	}{
		"Plain":            {"a  b\tc", []string{"a", "b", "c"}},
		"QuoteJoinsAround": {`x"b c"d`, []string{"xb cd"}},
		"EmptyQuoted":      {`a "" b`, []string{"a", "", "b"}},
		"BackslashOutside": {`a\b`, []string{`a\b`}},
		"EscapesInside":    {`"q\"\\z\n"`, []string{`q"\z\n`}},
		"InvalidUTF8Kept":  {"a\xffb", []string{"a\xffb"}},
		"OnlySpaces":       {" \t ", nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := Tokenize(tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Tokenize(%q) = %q, want %q", tc.text, got, tc.want)
			}
		})
	}
	if _, err := Tokenize(`x "y`); !errors.Is(err, ErrUnterminatedQuote) {
		t.Errorf("Tokenize unterminated: err = %v", err)
	}
}

func FuzzParsePattern(f *testing.F) {
	for _, s := range []string{"deploy {service} {version} {env=staging}", "x", "{a}", "a {b=} {c=d}", "a {b {c}", ""} {
		f.Add(s, "deploy api 1")
	}
	f.Fuzz(func(t *testing.T, pattern, text string) {
		p, err := ParsePattern(pattern)
		if err != nil {
			if !errors.Is(err, ErrPattern) {
				t.Fatalf("error %v does not wrap ErrPattern", err)
			}
			return
		}
		// A pattern's usage must itself round-trip into a pattern of the same shape.
		if _, err := ParsePattern(p.String()); err != nil {
			t.Fatalf("String() %q does not reparse: %v", p.String(), err)
		}
		args, ok := p.Match(text)
		if !ok {
			return
		}
		for _, ph := range p.Placeholders() {
			if _, present := args[ph.Name]; !present {
				t.Fatalf("match of %q against %q lacks %q: %v", text, pattern, ph.Name, args)
			}
		}
		if len(args) != len(p.Placeholders()) {
			t.Fatalf("match returned extra args: %v", args)
		}
	})
}

func FuzzMatch(f *testing.F) {
	p, err := ParsePattern("deploy {service} {version} {env=staging}")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"deploy api 1", `deploy "a b" 1 env=prod`, `deploy "`, "deploy a b c d", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		args, ok := p.Match(text)
		if ok && (args["service"] == "" && !strings.Contains(text, `""`)) {
			t.Fatalf("empty service from %q: %v", text, args)
		}
		toks, err := Tokenize(text)
		if err == nil && len(toks) > 4 && ok {
			t.Fatalf("matched %d tokens against a 4-slot pattern: %q", len(toks), text)
		}
	})
}
