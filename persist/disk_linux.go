package persist

import (
	"os"
	"syscall"
)

// freeBytes is the space an unprivileged writer may still use on dir's file system.
func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// allocateFile gives path real blocks from its start to upTo (at most its size);
// fallocate mode 0 keeps size and data and skips what is allocated already.
func allocateFile(path string, upTo int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	upTo = min(upTo, info.Size())
	if upTo <= 0 {
		return nil
	}
	for {
		err = syscall.Fallocate(int(f.Fd()), 0, 0, upTo)
		if err != syscall.EINTR {
			break
		}
	}
	if err == syscall.EOPNOTSUPP {
		return nil // the file system cannot: the free-space floor is the only guard
	}
	return err
}

// fdatasync writes f's data (and what is needed to read it back) to the disk.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
