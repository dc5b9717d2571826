//go:build !linux

package persist

import "errors"

// freeBytes is unknown off Linux: the free-space floor is not enforced there (ENOSPC from
// Badger still turns into ErrStorageUnavailable).
func freeBytes(string) (uint64, error) { return 0, errors.New("free space unknown on this OS") }

func allocateFile(string, int64) error { return nil }
