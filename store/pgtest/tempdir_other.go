//go:build !linux

package pgtest

import "os"

// tempParent is the usual temp dir; only Linux gets the /dev/shm speed-up.
func tempParent() string { return os.TempDir() }
