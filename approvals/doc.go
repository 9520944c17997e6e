// Package approvals decides whether a tool call may run: the allow/ask/deny
// policy, risk tiers, the suspended call a human decides on, who may decide,
// quorum, session grants and the hash-chained audit log.
//
// Everything here is pure logic over values; persistence is behind the Store
// interface this package declares, implemented by store/postgres and
// store/sqlite. The rules that must never break — deny is final, exactly one
// decision wins, nobody decides who may not — are enforced here, once, for
// every surface.
package approvals
