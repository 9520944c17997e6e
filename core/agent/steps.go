package agent

// DefaultMaxSteps is agents[].max_steps when the config leaves it out.
const DefaultMaxSteps = 20

// Steps is the max_steps budget of one agent run, stored with the run. A
// step is one tool call the model asked for (the run's steps are its tool
// calls, docs/agents.md), ask_user and calls with a Problem included,
// so a model that keeps calling a broken tool still stops. Model calls are
// bounded by it too: every model call but the last asks for at least one
// tool call, and once the budget is spent the loop makes one more call
// with ToolsNone for the final answer.
type Steps struct {
	Max  int `json:"max"`
	Used int `json:"used"`
}

// Take admits up to n calls of one turn and returns how many: the first k
// of the turn's calls run through the gate, the rest get
// Outcome{Kind: OutcomeStepLimit}.
func (s *Steps) Take(n int) (k int) {
	left := s.Left()
	k = max(0, min(n, left))
	s.Used += k
	return k
}

// Limit is the run's max_steps (DefaultMaxSteps when Max is not set).
func (s Steps) Limit() int {
	if s.Max <= 0 {
		return DefaultMaxSteps
	}
	return s.Max
}

// Left is how many calls the run may still make.
func (s Steps) Left() int { return max(0, s.Limit()-s.Used) }

// Spent reports whether the next model call must be made with ToolsNone.
func (s Steps) Spent() bool { return s.Left() == 0 }
