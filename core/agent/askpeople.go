package agent

import "context"

// A running tool may need a person, as an agent does with ask_user: an
// upstream MCP server's elicitation/create (docs/mcp-servers.md) is put to
// the people of the run that called the tool — the same question message,
// the same answerers, the same answer routes (chat, console, API, MCP) —
// while the call waits. The engine hands each gated dispatch a
// PeopleAsker in its context; a tool that may ask takes it from there.

// PeopleAsker puts ask to the people of the run whose tool call is being
// dispatched, introduced by intro (who asks and why), and waits for the
// answer until it expires or ctx ends. An error means the question could
// not be put at all (the run cannot wait for people now).
type PeopleAsker func(ctx context.Context, intro string, ask Ask) (PeopleAnswer, error)

// PeopleAnswer is what became of a question put with a PeopleAsker.
type PeopleAnswer struct {
	// Answered: Reply holds the validated answer, given by By.
	Answered bool
	Reply    Reply
	By       string
	// Cancelled: the run ended (cancelled) before anyone answered.
	Cancelled bool
	// Why says why there is no answer (expired, cancelled).
	Why string
}

type peopleAskerKey struct{}

// WithPeopleAsker returns ctx carrying a, for the dispatch of one call.
func WithPeopleAsker(ctx context.Context, a PeopleAsker) context.Context {
	return context.WithValue(ctx, peopleAskerKey{}, a)
}

// PeopleAskerFrom returns the PeopleAsker ctx carries, or nil where no
// person can be asked (a call outside a run's dispatch).
func PeopleAskerFrom(ctx context.Context) PeopleAsker {
	a, _ := ctx.Value(peopleAskerKey{}).(PeopleAsker)
	return a
}
