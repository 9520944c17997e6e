package config

import "testing"

// TestAccountOrGlobal checks that account and its older name global are each
// accepted alone and refused together, where one would be silently ignored.
func TestAccountOrGlobal(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"account", "global"} {
		cfg := parseOK(t, "channels:\n  discord:\n    rate_limits:\n      "+key+": {rate: \"50/s\"}\n")
		rl := cfg.Channels.Discord.RateLimits
		if rl.Account.IsZero() == rl.Global.IsZero() {
			t.Errorf("%s alone: account=%+v global=%+v", key, rl.Account, rl.Global)
		}
	}
	for _, ch := range []string{"slack", "telegram", "discord", "email", "console"} {
		src := "channels:\n  " + ch + ":\n    rate_limits:\n      account: {rate: \"30/s\"}\n      global: {rate: \"50/s\"}\n"
		wantProblem(t, src, "channels."+ch+".rate_limits.global", 5, "set account or global, not both")
	}
}
