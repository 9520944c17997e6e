package approvals

import (
	"slices"
	"strings"
	"time"
)

// Subject is who asks for a call and from where: what a rule's conditions
// see beside the call itself. The gate builds it from the call's requester
// and thread (Directory.Subject), the engine from the approval when a
// decision re-checks the policy.
type Subject struct {
	Requester Requester
	// Channel is the channel the call came from ("slack", "console",
	// "schedule", …): the channel of the run's thread.
	Channel string
	// Now is when the call is judged.
	Now time.Time
}

// Requester is the asking identity as conditions see it (the CEL variable
// requester): Person is the person's name when the configuration's people
// list the identity ("alice"), else the identity itself; Groups are the
// names of the approver groups that hold the identity, directly or through
// its person, sorted.
type Requester struct {
	Person   string   `cel:"person"`
	Identity string   `cel:"identity"`
	Groups   []string `cel:"groups"`
}

// Input is everything a rule's conditions see: the CEL variables tool,
// args, requester, channel, risk and now (docs/policy.md).
type Input struct {
	Tool      string
	Args      map[string]any
	Requester Requester
	Channel   string
	Risk      Risk
	Now       time.Time
}

// Condition is a rule's compiled `when` expression (approvals/condition
// compiles CEL into one). Holds reports whether the rule applies to in; an
// error (a missing argument, the cost limit reached) is judged fail-safe by
// Evaluate.
type Condition interface {
	Holds(in *Input) (bool, error)
}

// QuorumExpr is a rule's compiled quorum expression: how many distinct
// persons must approve in. An error makes Evaluate deny the call.
type QuorumExpr interface {
	Quorum(in *Input) (int, error)
}

// Subject returns the subject of a call asked by identity on channel at
// now, with the requester's person and groups as d knows them.
func (d *Directory) Subject(identity, channel string, now time.Time) Subject {
	return Subject{Requester: d.Requester(identity), Channel: channel, Now: now}
}

// Requester describes identity for conditions: its person and the approver
// groups that hold it (directly, through its person, or through another
// identity of the same person).
func (d *Directory) Requester(identity string) Requester {
	r := Requester{Identity: identity, Person: strings.TrimPrefix(d.Person(identity), PersonPrefix), Groups: []string{}}
	if d == nil || identity == "" {
		return r
	}
	for g, entries := range d.groups {
		if slices.Contains(entries, identity) || slices.Contains(d.Expand([]string{GroupPrefix + g}), identity) {
			r.Groups = append(r.Groups, g)
		}
	}
	slices.Sort(r.Groups)
	return r
}
