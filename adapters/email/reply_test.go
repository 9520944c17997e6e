package email

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseAnswer(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in string
		want     Answer
		err      string
	}{
		{"Approve", "approve", Answer{Action: "approve"}, ""},
		{"ApproveCaseAndBang", "  Approved!\n\nthanks", Answer{Action: "approve"}, ""},
		{"RejectColon", "reject: not during the freeze", Answer{Action: "reject", Reason: "not during the freeze"}, ""},
		{"RejectSpace", "Reject too risky", Answer{Action: "reject", Reason: "too risky"}, ""},
		{"RejectReasonNextLines", "reject\nwait for\nmonday", Answer{Action: "reject", Reason: "wait for monday"}, ""},
		{"RejectBare", "reject", Answer{Action: "reject"}, ""},
		{"EditLines", "edit\nservice: api\nversion: 1.2.4\n\nBob", Answer{Action: "edit", Args: map[string]any{"service": "api", "version": "1.2.4"}}, ""},
		{"EditJSONSameLine", `edit {"service":"api","replicas":3}`, Answer{Action: "edit", Args: map[string]any{"service": "api", "replicas": float64(3)}}, ""},
		{"EditJSONNextLines", "edit\n{\n \"version\": \"2\"\n}\n\n-- sig", Answer{Action: "edit", Args: map[string]any{"version": "2"}}, ""},
		{"EditTypedValues", "edit\ndry: true\ntags: [\"a\"]\nnote: \"x y\"\nv: 1.0", Answer{Action: "edit", Args: map[string]any{"dry": true, "tags": []any{"a"}, "note": "x y", "v": "1.0"}}, ""},
		{"EditEqualsSign", "edit: env = prod", Answer{Action: "edit", Args: map[string]any{"env": "prod"}}, ""},
		{"EditNothing", "edit", Answer{}, "needs the new arguments"},
		{"EditBadLine", "edit\nthis is prose", Answer{}, "not a \"key: value\" line"},
		{"EditDuplicate", "edit\na: 1\na: 2", Answer{}, "given twice"},
		{"EditJSONTrailing", `edit {"a":1} and more`, Answer{}, "text after the JSON"},
		{"EditJSONBroken", `edit {"a":`, Answer{}, "not a JSON object"},
		{"EditJSONNull", "edit\nnull", Answer{}, "not a \"key: value\""},
		{"Empty", "\n \n", Answer{}, "empty"},
		{"Unknown", "yes please", Answer{}, "is not approve, reject or edit"},
		{"ApproveWithTrailingWords", "approve this now", Answer{}, "is not approve"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseAnswer(c.in)
			if c.err != "" {
				if err == nil || !errors.Is(err, ErrUnreadableReply) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("ParseAnswer(%q) = %+v, %v; want error containing %q", c.in, got, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseAnswer(%q): %v", c.in, err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("ParseAnswer(%q) = %#v, want %#v", c.in, got, c.want)
			}
		})
	}
}

// FuzzParseAnswer: any text yields either a known action or an
// ErrUnreadableReply, never a panic; edit always carries arguments.
func FuzzParseAnswer(f *testing.F) {
	for _, s := range []string{"approve", "reject: x", "edit\na: b", `edit {"a":[1,{"b":null}]}`, "edit\n{", "Reject\n\nwhy"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAnswer(s)
		if err != nil {
			if !errors.Is(err, ErrUnreadableReply) {
				t.Fatalf("error %v does not wrap ErrUnreadableReply", err)
			}
			return
		}
		switch a.Action {
		case "approve", "reject":
			if a.Args != nil {
				t.Fatalf("%s with args %v", a.Action, a.Args)
			}
		case "edit":
			if a.Args == nil {
				t.Fatal("edit without args")
			}
		default:
			t.Fatalf("unknown action %q", a.Action)
		}
	})
}
