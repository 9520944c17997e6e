package main

import "strings"

// Global flags: the connection and output flags may come before the
// command as well as after it, as with kubectl and docker:
//
//	opsgate --server https://ops.example.com --token "$T" approvals list
//	opsgate approvals list --server https://ops.example.com --token "$T"
//
// run moves them behind the command, where each subcommand parses them
// with its own flags (so a command that does not take one says so).

// globalFlags are the flags that may come first; true for those that take
// a value.
var globalFlags = map[string]bool{"config": true, "server": true, "token": true, "o": true, "output": true, "json": false}

// hoistGlobals returns args with the global flags given before the command
// moved after it (before a "--", which ends the flags). A flag before the
// command that is not global, or one missing its value, is bad usage.
func hoistGlobals(args []string) ([]string, error) {
	var globals []string
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			break
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		takesValue, ok := globalFlags[name]
		if !ok {
			if isHelp(a) || a == "-version" || a == "--version" {
				break // opsgate --help, opsgate --version
			}
			return nil, usagef("flag %s before the command: only --config, --server, --token, -o/--output and --json may "+
				"come first; put it after the command", a)
		}
		globals = append(globals, a)
		if takesValue && !hasValue {
			if i+1 >= len(args) {
				return nil, usagef("flag %s needs a value", a)
			}
			i++
			globals = append(globals, args[i])
		}
	}
	if len(globals) == 0 {
		return args, nil
	}
	rest := args[i:]
	if len(rest) == 0 {
		return nil, usagef("flags %s but no command (see `opsgate help`)", strings.Join(globals, " "))
	}
	end := len(rest)
	for j, a := range rest {
		if a == "--" {
			end = j
			break
		}
	}
	out := make([]string, 0, len(args))
	out = append(out, rest[:end]...)
	out = append(out, globals...)
	return append(out, rest[end:]...), nil
}
