//go:build !linux

package persist

import (
	"errors"
	"os"
)

// freeBytes is unknown off Linux: the free-space floor is not enforced there (ENOSPC from
// Badger still turns into ErrStorageUnavailable).
func freeBytes(string) (uint64, error) { return 0, errors.New("free space unknown on this OS") }

func allocateFile(string, int64) error { return nil }

// fdatasync is a full sync off Linux.
func fdatasync(f *os.File) error { return f.Sync() }
