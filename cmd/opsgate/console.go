package main

import (
	"github.com/opsgate/opsgate/config"
	"github.com/opsgate/opsgate/core"
)

// enabledChannels names the channels cfg turns on, as their events and
// outbox messages are labelled, for the console home page's channel
// health (a configured channel that never saw a message still shows).
func enabledChannels(cfg *config.Config) []string {
	out := []string{core.ConsoleChannel}
	for _, spec := range channelSpecs {
		if spec.enabled(cfg) {
			out = append(out, spec.name)
		}
	}
	return out
}
