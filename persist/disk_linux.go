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

// allocateFile gives path real blocks from its start to lead bytes past its allocated part
// (at most its size); fallocate mode 0 keeps size and data. Files are written sequentially,
// so the allocated part covers what was written.
func allocateFile(path string, lead int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	allocated := st.Blocks * 512
	if allocated >= info.Size() {
		return nil // no holes left
	}
	target := min(info.Size(), allocated+lead)
	for {
		err = syscall.Fallocate(int(f.Fd()), 0, 0, target)
		if err != syscall.EINTR {
			break
		}
	}
	if err == syscall.EOPNOTSUPP {
		return nil // the file system cannot: the free-space floor is the only guard
	}
	return err
}
