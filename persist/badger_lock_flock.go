//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package persist

import (
	"os"
	"syscall"
)

// lockBadgerDir takes, for a moment, the lock an open Badger holds on its directory (an
// exclusive flock of the directory, as badger's acquireDirectoryLock takes it) without waiting:
// false when it cannot (another process, or another open in this one, has the directory). The
// caller calls unlock before Badger's own open, which takes the lock for itself.
func lockBadgerDir(dir string) (unlock func(), ok bool) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return func() { f.Close() }, true
}
