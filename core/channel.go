package core

// Channel names used as identifiers across packages (thread addresses,
// actor ids, event and outbox labels). Each is declared once here so a
// comparison in one package cannot drift from the name another builds.
const (
	// ConsoleChannel is the web console's channel; messages posted through
	// the API and MCP are console messages in console threads.
	ConsoleChannel = "console"
	// LocalChannel is the terminal chat's channel ("local:<key>").
	LocalChannel = "local"
)
