package discord

import (
	"context"
	"fmt"
	"reflect"
	"sort"

	discordapi "github.com/bwmarrin/discordgo"

	"github.com/opsgate/opsgate/core/chunk"
)

// commands are the slash commands opsgate registers: the catch-all
// `/ops command:<text>` and one command per flow with a string option per
// placeholder (required ones first, as Discord demands).
func (a *Adapter) commands() []*discordapi.ApplicationCommand {
	out := []*discordapi.ApplicationCommand{{
		Type: discordapi.ChatApplicationCommand, Name: a.cfg.Command,
		Description: "Ask opsgate to do something",
		Options: []*discordapi.ApplicationCommandOption{{
			Type: discordapi.ApplicationCommandOptionString, Name: "command", Required: true,
			Description: "What to do, e.g. deploy api 1.2.3 (or help)", MaxLength: 1500,
		}},
	}}
	for _, f := range a.cfg.Flows {
		desc := f.Description
		if desc == "" {
			desc = "Run the " + f.Name + " flow"
		}
		c := &discordapi.ApplicationCommand{Type: discordapi.ChatApplicationCommand, Name: f.Name, Description: chunk.Cut(desc, 100, chunk.Runes)}
		var req, opt []*discordapi.ApplicationCommandOption
		for _, o := range f.Options {
			d := "Required"
			if o.Optional {
				d = "Optional; default: " + o.Default
				if o.Default == "" {
					d = "Optional"
				}
			}
			op := &discordapi.ApplicationCommandOption{
				Type: discordapi.ApplicationCommandOptionString, Name: o.Name, Description: chunk.Cut(d, 100, chunk.Runes), Required: !o.Optional,
			}
			if o.Optional {
				opt = append(opt, op)
			} else {
				req = append(req, op)
			}
		}
		c.Options = append(req, opt...)
		out = append(out, c)
	}
	return out
}

// commandShape is what decides whether Discord's registered commands match
// ours; ids, versions and localizations Discord adds are ignored.
type commandShape struct {
	Type        discordapi.ApplicationCommandType
	Name        string
	Description string
	Options     []optionShape
}

type optionShape struct {
	Type        discordapi.ApplicationCommandOptionType
	Name        string
	Description string
	Required    bool
}

func shapes(cmds []*discordapi.ApplicationCommand) []commandShape {
	out := make([]commandShape, 0, len(cmds))
	for _, c := range cmds {
		if c == nil {
			continue
		}
		t := c.Type
		if t == 0 {
			t = discordapi.ChatApplicationCommand
		}
		s := commandShape{Type: t, Name: c.Name, Description: c.Description}
		for _, o := range c.Options {
			if o != nil {
				s.Options = append(s.Options, optionShape{Type: o.Type, Name: o.Name, Description: o.Description, Required: o.Required})
			}
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// RegisterCommands makes Discord's commands match the config: it reads
// what is registered and bulk-overwrites only when something differs, so a
// restart costs one GET and never burns the command-creation rate limit.
// It reports whether it wrote.
func (a *Adapter) RegisterCommands(ctx context.Context) (bool, error) {
	want := a.commands()
	have, err := a.api.ApplicationCommands(a.cfg.ApplicationID, a.cfg.GuildID, discordapi.WithContext(ctx))
	if err != nil {
		return false, fmt.Errorf("discord: list commands: %w", err)
	}
	if reflect.DeepEqual(shapes(have), shapes(want)) {
		return false, nil
	}
	if _, err := a.api.ApplicationCommandBulkOverwrite(a.cfg.ApplicationID, a.cfg.GuildID, want, discordapi.WithContext(ctx)); err != nil {
		return false, fmt.Errorf("discord: overwrite commands: %w", err)
	}
	a.log.Info("registered slash commands", "count", len(want), "guild", a.cfg.GuildID)
	return true, nil
}
