// Package condition compiles the CEL expressions of policy rules — a
// rule's `when` and a quorum written as an expression — into the
// approvals.Condition and approvals.QuorumExpr the policy evaluates.
//
// Expressions see the variables tool (string), args (map), requester
// ({person, identity, groups}), channel (string), risk (string) and now
// (timestamp); docs/policy.md lists them with examples. Compile
// type-checks an expression against them, so `opsgate config check`
// reports a misspelled variable or field, or a `when` that is not a bool,
// with its position. Evaluation is bounded: a cost limit stops an
// expensive expression and a deadline interrupts a long comprehension; the
// policy judges either as a failed evaluation, fail-safe.
package condition

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"

	"github.com/opsgate/opsgate/approvals"
)

// Bounds of one evaluation. CostLimit is in CEL's cost units (about one a
// comparison or field read; a comprehension costs per element): the
// example rules of docs/policy.md cost under 20, and 10,000 leaves room
// for a loop over a thousand list items while keeping a hostile one
// to about ten milliseconds. Deadline interrupts a comprehension that is
// still running (checked every interruptEvery iterations).
const (
	CostLimit      = 10_000
	Deadline       = 50 * time.Millisecond
	interruptEvery = 100
	// MaxSource bounds the length of one expression.
	MaxSource = 4096
)

// Kind is what an expression must produce.
type Kind int

// The kinds of expression.
const (
	// When is a rule's condition: a bool.
	When Kind = iota
	// Quorum is a quorum expression: an int (a whole double is accepted,
	// since JSON arguments are doubles).
	Quorum
)

func (k Kind) String() string {
	if k == Quorum {
		return "an integer"
	}
	return "a bool"
}

// Compiler compiles expressions against the policy's variables. Build one
// with NewCompiler and reuse it: building its environment is the slow
// part. It is safe for concurrent use.
type Compiler struct {
	env *cel.Env
}

// NewCompiler builds the CEL environment of policy expressions.
func NewCompiler() (*Compiler, error) {
	env, err := cel.NewEnv(
		ext.NativeTypes(reflect.TypeFor[approvals.Requester](), ext.ParseStructTags(true)),
		cel.Variable("tool", cel.StringType),
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("requester", cel.ObjectType("approvals.Requester")),
		cel.Variable("channel", cel.StringType),
		cel.Variable("risk", cel.StringType),
		cel.Variable("now", cel.TimestampType),
		cel.CrossTypeNumericComparisons(true),
	)
	if err != nil {
		return nil, fmt.Errorf("condition: environment: %w", err)
	}
	return &Compiler{env: env}, nil
}

// Error is an expression that does not compile: each problem with its
// position in the expression (line 1-based, column 1-based).
type Error struct {
	Problems []Problem
}

// Problem is one compile problem.
type Problem struct {
	Line, Column int
	Message      string
}

func (e *Error) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return strings.Join(parts, "; ")
}

func (p Problem) String() string {
	if p.Line == 0 {
		return p.Message
	}
	return fmt.Sprintf("%d:%d: %s", p.Line, p.Column, p.Message)
}

// Expr is a compiled expression; it implements approvals.Condition (When)
// and approvals.QuorumExpr (Quorum).
type Expr struct {
	src  string
	kind Kind
	prg  cel.Program
}

var (
	_ approvals.Condition  = (*Expr)(nil)
	_ approvals.QuorumExpr = (*Expr)(nil)
)

// Compile parses and type-checks src as an expression of kind k. The
// error is an *Error naming each problem's position.
func (c *Compiler) Compile(src string, k Kind) (*Expr, error) {
	if strings.TrimSpace(src) == "" {
		return nil, &Error{Problems: []Problem{{Message: "the expression is empty"}}}
	}
	if len(src) > MaxSource {
		return nil, &Error{Problems: []Problem{{Message: fmt.Sprintf("the expression is %d bytes long; at most %d", len(src), MaxSource)}}}
	}
	ast, iss := c.env.Compile(src)
	if iss != nil && iss.Err() != nil {
		e := &Error{}
		for _, ce := range iss.Errors() {
			p := Problem{Message: ce.Message}
			if ce.Location != nil {
				p.Line, p.Column = ce.Location.Line(), ce.Location.Column()+1
			}
			e.Problems = append(e.Problems, p)
		}
		return nil, e
	}
	out := ast.OutputType()
	want := cel.BoolType
	if k == Quorum {
		want = cel.IntType
	}
	if !out.IsExactType(want) && !out.IsExactType(cel.DynType) && !(k == Quorum && out.IsExactType(cel.DoubleType)) {
		return nil, &Error{Problems: []Problem{{Line: 1, Column: 1, Message: fmt.Sprintf("the expression gives %s, but it must give %s", out, k)}}}
	}
	prg, err := c.env.Program(ast, cel.CostLimit(CostLimit), cel.InterruptCheckFrequency(interruptEvery),
		cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, &Error{Problems: []Problem{{Message: err.Error()}}}
	}
	return &Expr{src: src, kind: k, prg: prg}, nil
}

// Source is the expression as written.
func (e *Expr) Source() string { return e.src }

// ErrType is an expression whose value is not of the kind it must give
// (a `when` reading a string argument as its result).
var ErrType = errors.New("wrong type")

// Holds evaluates a When expression.
func (e *Expr) Holds(in *approvals.Input) (bool, error) {
	v, err := e.eval(in)
	if err != nil {
		return false, err
	}
	b, ok := v.(types.Bool)
	if !ok {
		return false, fmt.Errorf("%w: the condition gave %s, not a bool", ErrType, v.Type())
	}
	return bool(b), nil
}

// Quorum evaluates a Quorum expression.
func (e *Expr) Quorum(in *approvals.Input) (int, error) {
	v, err := e.eval(in)
	if err != nil {
		return 0, err
	}
	switch n := v.(type) {
	case types.Int:
		if n < 1 || n > math.MaxInt32 {
			return 0, fmt.Errorf("%w: the quorum expression gave %d; want at least 1", ErrType, int64(n))
		}
		return int(n), nil
	case types.Double:
		if f := float64(n); f == math.Trunc(f) && f >= 1 && f <= math.MaxInt32 {
			return int(f), nil
		}
		return 0, fmt.Errorf("%w: the quorum expression gave %v; want a whole number, at least 1", ErrType, float64(n))
	}
	return 0, fmt.Errorf("%w: the quorum expression gave %s, not an integer", ErrType, v.Type())
}

// eval runs the program on in, bounded by CostLimit and Deadline.
func (e *Expr) eval(in *approvals.Input) (ref.Val, error) {
	ctx, cancel := context.WithTimeout(context.Background(), Deadline)
	defer cancel()
	args := in.Args
	if args == nil {
		args = map[string]any{}
	}
	groups := in.Requester.Groups
	if groups == nil {
		groups = []string{}
	}
	v, _, err := e.prg.ContextEval(ctx, map[string]any{
		"tool":      in.Tool,
		"args":      args,
		"requester": approvals.Requester{Person: in.Requester.Person, Identity: in.Requester.Identity, Groups: groups},
		"channel":   in.Channel,
		"risk":      string(in.Risk),
		"now":       in.Now.UTC(),
	})
	if err != nil {
		return nil, fmt.Errorf("condition %q: %w", clip(e.src), err)
	}
	return v, nil
}

// clip shortens an expression for an error message.
func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 60 {
		return string(r[:57]) + "..."
	}
	return s
}
