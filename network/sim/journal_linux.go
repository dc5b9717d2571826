package sim

import (
	"errors"
	"os"
	"syscall"
)

// mapJournals: journals append through a memory map on this platform.
const mapJournals = true

// errNoMap: the file cannot be mapped for appends here (the file system has no fallocate).
var errNoMap = errors.New("sim: journal not mappable")

// mapFile allocates f's blocks up to capacity (which also sets its size) and maps it whole,
// replacing old. A write into the map never needs a new block, so a full disk is an error
// here, not a fault later.
func mapFile(f *os.File, old []byte, capacity int64) ([]byte, error) {
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, capacity); err != nil {
		if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
			return nil, errNoMap
		}
		return nil, err
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, int(capacity), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	if old != nil {
		unmapFile(old)
	}
	return m, nil
}

func unmapFile(m []byte) { _ = syscall.Munmap(m) }

// madvPopulateWrite is MADV_POPULATE_WRITE (linux/mman.h, Linux 5.14), which the frozen
// syscall package does not name.
const madvPopulateWrite = 23

// populateWrite faults m's pages in for writing, as a write to each would.
func populateWrite(m []byte) error {
	if len(m) == 0 {
		return nil
	}
	return syscall.Madvise(m, madvPopulateWrite)
}
