package core

import "time"

// ConsoleSignin is one web console session begun through the identity
// provider (channels.console.oidc): the identity it acts as and the
// identity provider's groups as of sign-in. The console reads it on every
// request, so ending it (sign-out) counts on every replica; the groups
// are refreshed by signing in again (docs/console.md).
type ConsoleSignin struct {
	ID string
	// Identity is "console:<person claim>", as people and approver groups
	// name it.
	Identity string
	// Name is the identity provider's display name, for pages only.
	Name string
	// Groups are the identity provider's groups claim, unfiltered; the
	// console counts those that name configured approver groups.
	Groups    []string
	CreatedAt time.Time
	ExpiresAt time.Time
}
