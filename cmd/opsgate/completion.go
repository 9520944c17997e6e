package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
)

// `opsgate completion bash|zsh|fish` prints a shell completion script:
// commands, subcommands, each one's flags, and the values of the flags
// that take a few (docs/terminal.md, "Shell completion"). The flags are
// read from the commands' own --help, so the script cannot drift from
// what the commands accept.

// commandTree is every command and its subcommands ("" for none); the
// tests check it against usageText and the dispatch in run.
var commandTree = []struct {
	name, about string
	subs        []string
}{
	{"serve", "run the server", nil},
	{"migrate", "apply store migrations and exit", nil},
	{"config", "validate a configuration", []string{"check"}},
	{"approvals", "decide the calls that wait for a human", []string{"list", "show", "approve", "reject", "edit", "delegate", "receipt", "watch", "wait"}},
	{"runs", "follow and cancel runs", []string{"list", "show", "cancel"}},
	{"schedules", "list, fire, pause and resume schedules", []string{"list", "run", "pause", "resume"}},
	{"grants", "list and revoke grants", []string{"list", "revoke"}},
	{"audit", "the audit log: list, export, verify", []string{"list", "export", "verify"}},
	{"policy", "the policy in force", []string{"show"}},
	{"receipt", "verify a signed approval receipt", []string{"verify"}},
	{"tui", "the approvals queue in the terminal", nil},
	{"chat", "a local channel thread in the terminal", nil},
	{"healthcheck", "is the server up", nil},
	{"mcp", "upstream MCP servers", []string{"tools"}},
	{"completion", "print a shell completion script", []string{"bash", "zsh", "fish"}},
	{"version", "print the version", nil},
	{"help", "show help", nil},
}

// flagValues are the values offered after flags that take one of a few.
var flagValues = map[string]string{
	"o": "table wide json yaml", "output": "table wide json yaml", "format": "csv jsonl",
	"scope": "call task session forever", "log-format": "text json", "log-level": "debug info warn error",
	"status": "pending approved rejected edited expired all queued running waiting_approval waiting_input succeeded failed cancelled interrupted",
}

// fileFlags take a file name.
var fileFlags = map[string]bool{"config": true}

// cmdFlag is one flag of a command: its name and whether it takes a value.
type cmdFlag struct {
	name  string
	value bool
}

// helpFlag matches a flag line of the flag package's usage output:
// "  -name" (a bool) or "  -name type".
var helpFlag = regexp.MustCompile(`(?m)^  -([A-Za-z0-9][A-Za-z0-9-]*)( \S+)?$`)

// flagsOf runs `opsgate <words> --help` in process and reads its flags.
func flagsOf(words ...string) []cmdFlag {
	var out bytes.Buffer
	run(context.Background(), append(words, "--help"), &out, io.Discard)
	var flags []cmdFlag
	for _, m := range helpFlag.FindAllStringSubmatch(out.String(), -1) {
		flags = append(flags, cmdFlag{name: m[1], value: m[2] != ""})
	}
	return flags
}

// completionSpec is the command tree with every command's flags.
type completionSpec struct {
	commands []string
	subs     map[string][]string
	// flags by "cmd" or "cmd sub".
	flags map[string][]cmdFlag
	// valued are all flags that take a value, to skip their values when
	// looking for the command words.
	valued []string
}

func buildSpec() completionSpec {
	sp := completionSpec{subs: map[string][]string{}, flags: map[string][]cmdFlag{}}
	valued := map[string]bool{}
	add := func(key string, fs []cmdFlag) {
		sp.flags[key] = fs
		for _, f := range fs {
			if f.value {
				valued[f.name] = true
			}
		}
	}
	for _, c := range commandTree {
		sp.commands = append(sp.commands, c.name)
		if c.name == "help" || c.name == "completion" {
			continue
		}
		if len(c.subs) == 0 {
			add(c.name, flagsOf(c.name))
			continue
		}
		sp.subs[c.name] = c.subs
		for _, s := range c.subs {
			add(c.name+" "+s, flagsOf(c.name, s))
		}
	}
	sp.subs["completion"] = []string{"bash", "zsh", "fish"}
	for f := range valued {
		sp.valued = append(sp.valued, f)
	}
	sort.Strings(sp.valued)
	return sp
}

func cmdCompletion(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("completion", "completion bash|zsh|fish", `
Prints a completion script for the shell. Load it in the current shell or
from the shell's startup file:
  bash  source <(opsgate completion bash)                    (~/.bashrc)
  zsh   source <(opsgate completion zsh)                     (~/.zshrc, after compinit)
  fish  opsgate completion fish > ~/.config/fish/completions/opsgate.fish`, stdout, stderr)
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("usage: opsgate completion bash|zsh|fish")
	}
	sp := buildSpec()
	switch pos[0] {
	case "bash":
		_, err = io.WriteString(stdout, sp.bash())
	case "zsh":
		_, err = io.WriteString(stdout, "# opsgate zsh completion: the bash script through zsh's bashcompinit.\n"+
			"autoload -U +X bashcompinit && bashcompinit\n"+sp.bash())
	case "fish":
		_, err = io.WriteString(stdout, sp.fish())
	default:
		return usagef("completion %q: want bash, zsh or fish", pos[0])
	}
	return err
}

// dashes is how a flag is offered: "--name", or "-o" for one letter.
func dashes(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

func (sp completionSpec) bash() string {
	var b strings.Builder
	b.WriteString(`# opsgate bash completion: source <(opsgate completion bash)
_opsgate() {
  local cur prev cmd="" sub="" i w skip=0
  cur="${COMP_WORDS[COMP_CWORD]}"
  prev="${COMP_WORDS[COMP_CWORD-1]}"
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="${COMP_WORDS[i]}"
    if ((skip)); then skip=0; continue; fi
    case "$w" in
      -*=*) ;;
      -*) case "${w#-}" in
`)
	for _, f := range sp.valued {
		fmt.Fprintf(&b, "          %s|-%s) skip=1 ;;\n", f, f)
	}
	b.WriteString(`        esac ;;
      *) if [[ -z $cmd ]]; then cmd="$w"; elif [[ -z $sub ]]; then sub="$w"; fi ;;
    esac
  done
  case "$prev" in
`)
	var vals []string
	for f := range flagValues {
		vals = append(vals, f)
	}
	sort.Strings(vals)
	for _, f := range vals {
		fmt.Fprintf(&b, "    -%s|--%s) COMPREPLY=($(compgen -W %q -- \"$cur\")); return ;;\n", f, f, flagValues[f])
	}
	for f := range fileFlags {
		fmt.Fprintf(&b, "    -%s|--%s) COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n", f, f)
	}
	fmt.Fprintf(&b, `  esac
  if [[ -z $cmd ]]; then
    COMPREPLY=($(compgen -W %q -- "$cur"))
    return
  fi
  local subs="" flags=""
  case "$cmd" in
`, strings.Join(append(append([]string{}, sp.commands...), "--config", "--server", "--token", "-o", "--output", "--json", "--help"), " "))
	for _, c := range sp.commands {
		if subs := sp.subs[c]; len(subs) > 0 {
			fmt.Fprintf(&b, "    %s) subs=%q ;;\n", c, strings.Join(subs, " "))
		}
	}
	b.WriteString(`  esac
  if [[ -n $subs && -z $sub ]]; then
    COMPREPLY=($(compgen -W "$subs" -- "$cur"))
    return
  fi
  case "$cmd${sub:+ $sub}" in
`)
	keys := make([]string, 0, len(sp.flags))
	for k := range sp.flags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var names []string
		for _, f := range sp.flags[k] {
			names = append(names, dashes(f.name))
		}
		fmt.Fprintf(&b, "    %q) flags=%q ;;\n", k, strings.Join(append(names, "--help"), " "))
	}
	b.WriteString(`  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
  fi
}
complete -o default -F _opsgate opsgate
`)
	return b.String()
}

func (sp completionSpec) fish() string {
	var b strings.Builder
	b.WriteString("# opsgate fish completion: opsgate completion fish > ~/.config/fish/completions/opsgate.fish\n")
	b.WriteString("complete -c opsgate -f\n")
	about := map[string]string{}
	for _, c := range commandTree {
		about[c.name] = c.about
	}
	for _, c := range sp.commands {
		fmt.Fprintf(&b, "complete -c opsgate -n __fish_use_subcommand -a %s -d %s\n", c, fishQuote(about[c]))
	}
	for _, c := range sp.commands {
		subs := sp.subs[c]
		if len(subs) == 0 {
			continue
		}
		all := strings.Join(subs, " ")
		fmt.Fprintf(&b, "complete -c opsgate -n '__fish_seen_subcommand_from %s; and not __fish_seen_subcommand_from %s' -a %s\n", c, all, fishQuote(all))
	}
	keys := make([]string, 0, len(sp.flags))
	for k := range sp.flags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cond := "__fish_seen_subcommand_from " + k
		if cmd, sub, ok := strings.Cut(k, " "); ok {
			cond = "__fish_seen_subcommand_from " + cmd + "; and __fish_seen_subcommand_from " + sub
		}
		for _, f := range sp.flags[k] {
			opt := "-l " + f.name
			if len(f.name) == 1 {
				opt = "-s " + f.name
			}
			line := fmt.Sprintf("complete -c opsgate -n '%s' %s", cond, opt)
			switch {
			case flagValues[f.name] != "":
				line += " -x -a " + fishQuote(flagValues[f.name])
			case fileFlags[f.name]:
				line += " -r -F"
			case f.value:
				line += " -x"
			}
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// fishQuote quotes s for fish (single quotes; \' and \\ inside).
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
