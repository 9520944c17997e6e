package approvals

import (
	"path"
	"regexp"
	"strings"
)

// Path-like argument values are matched, shown and run in one cleaned
// form, so "/./etc/x", "//etc/x" and "/srv/../etc/x" cannot slip past a
// deny on "/etc/*" (or under an allow on "/srv/*") while the program that
// receives them opens /etc/x.
//
// What is path-like (everything else is left exactly as typed):
//   - a string containing "/" that starts with "/" or has a "." or ".."
//     segment ("/etc//x", "./a/../b", "logs/../../etc/passwd");
//   - a URL "scheme://authority/path…": only its path is cleaned, after
//     "%2E" is read as "." (RFC 3986 makes them equivalent); the scheme,
//     authority, query and fragment are kept.
//
// Cleaning is path.Clean's lexical rules (no file system is consulted, so
// ".." is resolved the way the policy reads it, not through symlinks), with
// two meanings kept: a trailing "/" stays, and a leading "./" stays (for
// many programs "./x" is a path where "x" may be a name, e.g. a git ref).
// A relative path cannot be resolved against the tool's working directory:
// rules on relative paths should come with a schema pattern that forbids
// "..", or require absolute paths.

// urlPrefix matches "scheme://authority" of a URL value.
var urlPrefix = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*`)

// CleanPath returns the cleaned form of a path-like value and true, or s
// unchanged and false when s is not path-like.
func CleanPath(s string) (string, bool) {
	if !strings.Contains(s, "/") {
		return s, false
	}
	if m := urlPrefix.FindString(s); m != "" {
		rest := s[len(m):]
		end := strings.IndexAny(rest, "?#")
		if end < 0 {
			end = len(rest)
		}
		p := rest[:end]
		if p == "" {
			return s, false
		}
		p = encodedDots.Replace(p)
		return m + cleanSlashPath(p) + rest[end:], true
	}
	if !strings.HasPrefix(s, "/") && !hasDotSegment(s) {
		return s, false
	}
	return cleanSlashPath(s), true
}

// cleanSlashPath is path.Clean keeping a trailing "/" and a leading "./".
func cleanSlashPath(p string) string {
	c := path.Clean(p)
	if strings.HasPrefix(p, "./") && c != "." && !strings.HasPrefix(c, "/") && !strings.HasPrefix(c, "../") && c != ".." {
		c = "./" + c
	}
	if strings.HasSuffix(p, "/") && !strings.HasSuffix(c, "/") {
		c += "/"
	}
	return c
}

func hasDotSegment(s string) bool {
	for _, seg := range strings.Split(s, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// CleanValue returns v with every path-like string in it cleaned: v itself,
// or the strings inside lists and objects. Other values are returned as
// they are.
func CleanValue(v any) any {
	switch x := v.(type) {
	case string:
		c, _ := CleanPath(x)
		return c
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = CleanValue(e)
		}
		return out
	case map[string]any:
		return CleanArgs(x)
	}
	return v
}

// CleanArgs returns a copy of args with every path-like value cleaned
// (CleanValue). The engine applies it before the schema, the policy, the
// card and the tool, so all four see the same value. A nil map stays nil.
func CleanArgs(args map[string]any) map[string]any {
	if args == nil {
		return nil
	}
	out := make(map[string]any, len(args))
	for k, v := range args {
		out[k] = CleanValue(v)
	}
	return out
}

// encodedDots decodes percent-encoded dots; built once (a Replacer is safe
// for concurrent use).
var encodedDots = strings.NewReplacer("%2E", ".", "%2e", ".")
