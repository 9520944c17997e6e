// Package configs holds the example configurations shipped with opsgate.
//
// quickstart.yaml is embedded so that `opsgate serve` with no config file at
// all starts a working bot (SQLite under ./data, the web console, two demo
// tools). production.yaml is documentation: a full example of every key.
// The demo tools' scripts (demo/*.sh) are embedded too: serve writes them
// under <data_dir>/demo/ at start when a configured tool runs one from
// there, so the quickstart works from any directory, and in the container
// image, with nothing but the binary.
package configs

import (
	"embed"
)

// Quickstart is the built-in configuration used when neither --config,
// $OPSGATE_CONFIG nor ./opsgate.yaml names a file. It is a variable only
// because go:embed requires one; treat it as read-only.
//
//go:embed quickstart.yaml
var Quickstart []byte

// QuickstartName is the name problems in the embedded quickstart are
// reported under, so `config check` output points at the right file.
const QuickstartName = "configs/quickstart.yaml (built-in)"

// Demo holds the demo tools' scripts under DemoDir ("demo/status.sh",
// "demo/deploy.sh").
//
//go:embed demo/*.sh
var Demo embed.FS

// DemoDir is the directory of the scripts in Demo, and their directory
// under the data dir once installed.
const DemoDir = "demo"
