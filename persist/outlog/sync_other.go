//go:build !linux

package outlog

import "os"

// fdatasync is fsync where fdatasync is not to be had.
func fdatasync(f *os.File) error { return f.Sync() }
