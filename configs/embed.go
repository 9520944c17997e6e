// Package configs holds the example configurations shipped with opsgate.
//
// quickstart.yaml is embedded so that `opsgate serve` with no config file at
// all starts a working bot (SQLite under ./data, the web console, two demo
// tools). production.yaml is documentation: a full example of every key.
package configs

import _ "embed"

// Quickstart is the built-in configuration used when neither --config,
// $OPSGATE_CONFIG nor ./opsgate.yaml names a file. It is a variable only
// because go:embed requires one; treat it as read-only.
//
//go:embed quickstart.yaml
var Quickstart []byte

// QuickstartName is the name problems in the embedded quickstart are
// reported under, so `config check` output points at the right file.
const QuickstartName = "configs/quickstart.yaml (built-in)"
