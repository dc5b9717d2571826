package outlog

import (
	"os"
	"syscall"
)

// fdatasync is fdatasync(2): the file's data and its size, not its times.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
