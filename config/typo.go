package config

import "strings"

// followOns are the problems a mistyped key causes elsewhere: with "tols:"
// for "tools:" every step would also name "no tool", with "acton:" for
// "action:" the rule's approvers would "only apply to action ask". The
// section is the key the typo was taken to mean, from the root, or from
// the problem's own mapping when it starts with ".".
var followOns = []struct{ section, message string }{
	{"tools", "no tool named"},
	{"approvers", "unknown approver group"},
	{"approvers.groups", "unknown approver group"},
	{"people", "unknown person"},
	{"models", "no model named"},
	{"approvers", "eligible approvers"},
	{"approvers.groups", "eligible approvers"},
	{"people", "eligible approvers"},
	{".action", "approvers only apply to action ask"},
}

// followsTypo reports a problem that only follows from a mistyped key: at
// or under the path the typo was taken to mean, or one of followOns.
func (c *checker) followsTypo(path, msg string) bool {
	if len(c.typos) == 0 {
		return false
	}
	for p := path; p != ""; p = parentPath(p) {
		if c.typos[p] {
			return true
		}
	}
	for _, f := range followOns {
		section := f.section
		if strings.HasPrefix(section, ".") {
			section = parentPath(path) + section
		}
		if strings.Contains(msg, f.message) && c.typos[section] {
			return true
		}
	}
	return false
}

// parentPath is the path of the mapping or list holding path's last key
// ("policy.rules[0]" for "policy.rules[0].action"; "" at the root).
func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}
