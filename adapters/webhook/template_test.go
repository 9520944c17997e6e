package webhook

import "testing"

// TestEveryPrintedValueIsOneToken renders text templates of every shape a
// value can be printed through and checks each value came out as one
// token; verbatim and declarations are the only exceptions.
func TestEveryPrintedValueIsOneToken(t *testing.T) {
	t.Parallel()
	doc := map[string]any{"a": "x y=1", "xs": []any{"p q", "r"}, "n": nil}
	for _, c := range []struct{ src, want string }{
		{`run {{.a}}`, `run "x y=1"`},
		{`run {{quote .a}}`, `run "x y=1"`},
		{`run {{verbatim .a}}`, `run x y=1`},
		{`run {{.a | printf "%s!"}}`, `run "x y=1!"`},
		{`run {{printf "%s-%s" .a .a}}`, `run "x y=1-x y=1"`},
		{`run{{range .xs}} {{.}}{{end}}`, `run "p q" "r"`},
		{`run {{if .a}}{{.a}}{{else}}none{{end}}`, `run "x y=1"`},
		{`run {{with .a}}{{.}}{{end}}`, `run "x y=1"`},
		{`{{$v := .a}}run {{$v}}`, `run "x y=1"`},
		{`{{define "sub"}}{{.}}{{end}}run {{template "sub" .a}}`, `run "x y=1"`},
		{`run {{.n}}`, `run ""`},
	} {
		tm, err := parseTemplate("t", c.src, true)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		got, err := render(tm, doc)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		if got != c.want {
			t.Errorf("%s rendered %q, want %q", c.src, got, c.want)
		}
	}
	// A thread name is not a command line: written as rendered.
	tm, err := parseTemplate("t", `{{.a}}`, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := render(tm, doc); got != "x y=1" {
		t.Errorf("thread rendered %q", got)
	}
}
