package approvals

import (
	"reflect"
	"slices"
)

// ChangeKind says how an edit changed one argument.
type ChangeKind string

// The kinds of change.
const (
	ChangeChanged ChangeKind = "changed"
	ChangeAdded   ChangeKind = "added"
	ChangeRemoved ChangeKind = "removed"
)

// Change is one argument an approver's edit changed, its values as people
// read them (strings as they are, anything else as compact JSON): From is
// "" for an added argument, To "" for a removed one.
type Change struct {
	Name string     `json:"name"`
	Kind ChangeKind `json:"kind"`
	From string     `json:"from,omitempty"`
	To   string     `json:"to,omitempty"`
}

// Changes is the per-field diff from proposed to edited arguments, sorted
// by name; none when they are equal. Values are compared as JSON values
// (CanonicalArgs), so 2 and 2.0 are one value.
func Changes(proposed, edited map[string]any) []Change {
	from, _ := CanonicalArgs(proposed).(map[string]any)
	to, _ := CanonicalArgs(edited).(map[string]any)
	names := make([]string, 0, len(from)+len(to))
	for k := range from {
		names = append(names, k)
	}
	for k := range to {
		if _, ok := from[k]; !ok {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	var out []Change
	for _, k := range names {
		f, hadF := from[k]
		t, hasT := to[k]
		switch {
		case !hadF:
			out = append(out, Change{Name: k, Kind: ChangeAdded, To: shown(t)})
		case !hasT:
			out = append(out, Change{Name: k, Kind: ChangeRemoved, From: shown(f)})
		case !reflect.DeepEqual(f, t):
			out = append(out, Change{Name: k, Kind: ChangeChanged, From: shown(f), To: shown(t)})
		}
	}
	return out
}

// Edits is a's diff from its proposed to the arguments it now lets run:
// none until an approver edited them.
func (a *Approval) Edits() []Change {
	if a.ApprovedArgs == nil {
		return nil
	}
	return Changes(a.ProposedArgs, a.ApprovedArgs)
}

func shown(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return compactJSON(v)
}
