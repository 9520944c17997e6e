package approvals

import (
	"path"
	"strings"
	"testing"
)

func TestCleanPath(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in, want string
		pathLike bool
	}{
		{"/./etc/x", "/etc/x", true},
		{"//etc/x", "/etc/x", true},
		{"/etc/../etc/x", "/etc/x", true},
		{"/srv/../etc/x", "/etc/x", true},
		{"/../../etc/x", "/etc/x", true},
		{"/etc/", "/etc/", true},
		{"/", "/", true},
		{"./a/../b", "./b", true},
		{"./deploy.sh", "./deploy.sh", true},
		{"../up/./x", "../up/x", true},
		{"logs/../../etc/passwd", "../etc/passwd", true},
		{"https://h/a/../admin?x=/../y#f", "https://h/admin?x=/../y#f", true},
		{"https://h/a/%2e%2e/admin", "https://h/admin", true},
		{"https://h", "https://h", false},
		{"api", "api", false},
		{"..", "..", false},
		{"v1.2.3", "v1.2.3", false},
		{"feature/x", "feature/x", false},     // a branch, not cleaned
		{"ab//cd+ef==", "ab//cd+ef==", false}, // base64 keeps its slashes
		{"/\n/../etc/x", "/etc/x", true},      // control characters do not hide a walk
	}
	for _, c := range cases {
		got, ok := CleanPath(c.in)
		if got != c.want || ok != c.pathLike {
			t.Errorf("CleanPath(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.pathLike)
		}
	}
}

// TestPolicyMatchesCleanedPaths: each bypass of a deny by spelling, and
// each walk out of an allow, on Evaluate alone (callers that do not clean
// first are protected too).
func TestPolicyMatchesCleanedPaths(t *testing.T) {
	t.Parallel()
	p := &Policy{Rules: []Rule{
		{Tool: "cat", Effect: EffectAsk, Approvers: []string{"group:sre"}},
		{Tool: "cat", Args: map[string]string{"path": "/srv/*"}, Effect: EffectAllow},
		{Tool: "cat", Args: map[string]string{"path": "/etc/*"}, Effect: EffectDeny},
		{Tool: "fetch", Args: map[string]string{"url": "https://internal/admin*"}, Effect: EffectDeny},
	}}
	cat := ToolInfo{Name: "cat", Risk: RiskRead}
	for _, c := range []struct {
		tool ToolInfo
		args map[string]any
		want Effect
	}{
		{cat, map[string]any{"path": "/./etc/shadow"}, EffectDeny},
		{cat, map[string]any{"path": "//etc/shadow"}, EffectDeny},
		{cat, map[string]any{"path": "/etc/../etc/shadow"}, EffectDeny},
		{cat, map[string]any{"path": "/srv/../etc/shadow"}, EffectDeny},
		{cat, map[string]any{"path": "/srv/../root/.ssh/id_rsa"}, EffectAsk},
		{cat, map[string]any{"path": "/srv/app/./log"}, EffectAllow},
		{cat, map[string]any{"path": []any{"/srv/a", "/./etc/shadow"}}, EffectAsk}, // a list is not a path glob's business
		{ToolInfo{Name: "fetch"}, map[string]any{"url": "https://internal/x/../admin/users"}, EffectDeny},
		{ToolInfo{Name: "fetch"}, map[string]any{"url": "https://internal/x/%2E%2E/admin"}, EffectDeny},
	} {
		if v := p.Evaluate(c.tool, c.args, Subject{}); v.Effect != c.want {
			t.Errorf("%s %v: %s (%s), want %s", c.tool.Name, c.args, v.Effect, v.Why, c.want)
		}
	}
	// A deny also matches the raw form: a rule written against a dotted
	// spelling still stops it.
	raw := &Policy{Rules: []Rule{{Tool: "cat", Args: map[string]string{"path": "*/../*"}, Effect: EffectDeny}}, Default: DefaultAllow}
	if v := raw.Evaluate(cat, map[string]any{"path": "/srv/../etc/x"}, Subject{}); v.Effect != EffectDeny {
		t.Errorf("deny on the raw form: %s", v.Effect)
	}
}

// FuzzCleanPath: cleaning never panics, is idempotent, leaves a path with
// no "." or ".." segment and no empty one inside, and keeps what a plain
// absolute path means to the kernel (lexically).
func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"/./etc/x", "//etc/x", "/etc/../etc/x", "./a/../b", "https://h/a/../b?q", "a/b", "..", "/", "x://"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, ok := CleanPath(s)
		if again, _ := CleanPath(c); again != c {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, c, again)
		}
		if !ok {
			if c != s {
				t.Fatalf("not path-like but changed: %q -> %q", s, c)
			}
			return
		}
		if urlPrefix.MatchString(s) {
			return
		}
		p := strings.TrimSuffix(strings.TrimPrefix(c, "./"), "/")
		for _, seg := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
			if (seg == "." && p != ".") || (seg == ".." && strings.HasPrefix(c, "/")) || (seg == "" && p != "" && p != "/") {
				t.Fatalf("%q cleaned to %q, which keeps segment %q", s, c, seg)
			}
		}
		if strings.HasPrefix(s, "/") && path.Clean(c) != path.Clean(s) {
			t.Fatalf("%q cleaned to %q: not the same path", s, c)
		}
	})
}
