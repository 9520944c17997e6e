// Package core holds the platform-agnostic heart of opsgate: the types every
// adapter speaks (ChannelEvent, Actor, Thread, Card, Outbound), the small
// interfaces the core needs from the outside world (adapters and stores), and,
// in sub-packages, the engine that runs flows behind the approval gate.
//
// Nothing here knows a platform by name. An adapter turns a platform's request
// into a ChannelEvent and hands it to a Sink; the engine answers through the
// durable outbox, and the delivery pipeline hands rendered messages back to
// the adapter's Send. Capabilities a platform may lack (editing a card in
// place, threads) are optional interfaces with a documented fallback.
package core
