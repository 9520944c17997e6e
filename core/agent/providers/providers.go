// Package providers builds the agent.Model for a configured model: the
// provider named in the spec, wrapped in agent.Traced (a span per attempt)
// and agent.Retrying with the spec's per-turn timeout. It is the one place
// that knows every provider, so the loop and the wiring never switch on a
// provider's name.
package providers

import (
	"fmt"

	"github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/agent/anthropic"
	"github.com/opsgate/opsgate/core/agent/openai"
)

// New returns the ready model for spec. policy.Timeout defaults to
// spec.Timeout; the rest of policy to agent.RetryPolicy's defaults.
func New(spec agent.ModelSpec, policy agent.RetryPolicy) (agent.Model, error) {
	var m agent.Model
	var err error
	switch spec.Provider {
	case agent.ProviderOpenAI:
		m, err = openai.New(spec)
	case agent.ProviderAnthropic:
		m, err = anthropic.New(spec)
	default:
		return nil, fmt.Errorf("model %s: unknown provider %q (openai or anthropic)", spec.Name, spec.Provider)
	}
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", spec.Name, err)
	}
	if policy.Timeout == 0 {
		policy.Timeout = spec.Timeout
	}
	return agent.Retrying(agent.Traced(m, spec.Provider, spec.Model), policy), nil
}
