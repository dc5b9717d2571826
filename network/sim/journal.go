package sim

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
)

// journal is an append-only file of JSON lines, one record a line.
//
// Durability choice: an append is in the kernel's page cache before the caller returns, and
// there is no fsync. A process that is killed (kill -9, panic, OOM) loses nothing; only a
// machine crash can lose the last records. That is the promise the sim needs (it stands for
// the outside world across gateway restarts), and an fsync per message would cost more than
// the rest of a send.
//
// On Linux an append is a copy into a shared memory map of the file, whose blocks are
// allocated (fallocate) before they are mapped, so a full disk fails the growth with ENOSPC
// instead of a write faulting, and whose pages are faulted in a megabyte ahead of the
// copies (prefault): no system call per record (a write(2) per delivery was the
// sim's largest cost in a profile of the send path, issue 21). The file is grown in steps and
// cut back to its records on close; after a kill, replay finds the records' end at the first
// NUL byte of the unused tail. Elsewhere each append is one write(2).
//
// A journal is not safe for concurrent appends; its owner serialises them under a mutex.
// Reads (readLineAt) may run concurrently with appends: they only touch bytes already written,
// through pread, never through the map.
type journal struct {
	f    *os.File
	path string
	size int64  // offset of the next append (the records' end)
	m    []byte // the file mapped from its start (nil: appends use write(2))
	// faulted: the map's pages before this offset are faulted in for writing (prefault);
	// noPrefault: the kernel cannot (before Linux 5.14), each page faults on its first copy.
	faulted    int64
	noPrefault bool
	// noMap: the file system cannot allocate ahead (no fallocate): write(2) from now on.
	noMap bool
}

// openJournal opens or creates the journal at path. replay must be called before the first
// append.
func openJournal(path string) (*journal, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	return &journal{f: f, path: path}, nil
}

// replay hands each complete line (without its newline) and its offset to fn, in file order;
// fn must not keep the slice, and may call readLineAt for earlier lines. A line that fn
// rejects is logged and skipped. A last line without its newline is a write torn by a crash:
// it is cut off, so the next append starts on a fresh line.
func (j *journal) replay(log *slog.Logger, fn func(off int64, line []byte) error) error {
	if _, err := j.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("sim: read %s: %w", j.path, err)
	}
	r := bufio.NewReaderSize(j.f, 256<<10)
	var off int64
	var long []byte // a line longer than the reader's buffer, gathered piece by piece
	for {
		chunk, err := r.ReadSlice('\n')
		if bytes.IndexByte(chunk, 0) >= 0 {
			// The unused, zeroed tail of a mapped journal whose process was killed (a record
			// cut short by the kill ends there too): the records end at this line.
			if len(long) > 0 || chunk[0] != 0 {
				log.Warn("sim: cutting off a torn last line", "file", j.path, "offset", off)
			}
			if err := j.f.Truncate(off); err != nil {
				return fmt.Errorf("sim: cut the tail of %s: %w", j.path, err)
			}
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, chunk...)
			continue
		}
		line := chunk
		if long != nil {
			line = append(long, chunk...)
			long = nil
		}
		if errors.Is(err, io.EOF) {
			if len(line) > 0 {
				log.Warn("sim: cutting off a torn last line", "file", j.path, "offset", off, "bytes", len(line))
				if err := j.f.Truncate(off); err != nil {
					return fmt.Errorf("sim: cut torn line of %s: %w", j.path, err)
				}
			}
			break
		}
		if err != nil {
			return fmt.Errorf("sim: read %s: %w", j.path, err)
		}
		if err := fn(off, line[:len(line)-1]); err != nil {
			log.Warn("sim: skipping an unreadable line", "file", j.path, "offset", off, "err", err)
		}
		off += int64(len(line))
	}
	j.size = off
	return nil
}

// Growth of a mapped journal: at least journalStep at a time, doubling up to journalMaxStep;
// its pages faulted in journalPrefault at a time.
const (
	journalStep     = 1 << 20
	journalMaxStep  = 64 << 20
	journalPrefault = 1 << 20
)

// pageSize: a prefault starts on a page (madvise wants its start aligned).
var pageSize = int64(os.Getpagesize())

// append writes b (one or more whole lines) and returns the offset it starts at: a copy into
// the map (grown first when b does not fit), or one write(2). On a failed or short write the
// file is cut back, so no partial line stays behind.
func (j *journal) append(b []byte) (int64, error) {
	off := j.size
	if end := off + int64(len(b)); mapJournals && !j.noMap && end > int64(len(j.m)) {
		if err := j.grow(end); err != nil {
			return 0, err
		}
	}
	if j.m != nil {
		if end := off + int64(len(b)); end > j.faulted && !j.noPrefault {
			j.prefault(end)
		}
		copy(j.m[off:], b)
		j.size += int64(len(b))
		return off, nil
	}
	if _, err := j.f.Seek(off, io.SeekStart); err != nil {
		return 0, fmt.Errorf("sim: append to %s: %w", j.path, err)
	}
	n, err := j.f.Write(b)
	if err != nil {
		if n > 0 {
			_ = j.f.Truncate(off)
		}
		return 0, fmt.Errorf("sim: append to %s: %w", j.path, err)
	}
	j.size += int64(n)
	return off, nil
}

// grow maps the file up to at least end, its blocks allocated first. Where the platform or
// the file system cannot (no fallocate), the journal goes on with write(2).
func (j *journal) grow(end int64) error {
	step := min(max(int64(len(j.m)), journalStep), journalMaxStep)
	capacity := (end + step - 1) / step * step
	m, err := mapFile(j.f, j.m, capacity)
	switch {
	case errors.Is(err, errNoMap):
		j.noMap = true
		if j.m != nil {
			unmapFile(j.m)
			j.m = nil
			if err := j.f.Truncate(j.size); err != nil {
				return fmt.Errorf("sim: append to %s: %w", j.path, err)
			}
		}
		return nil
	case err != nil:
		return fmt.Errorf("sim: append to %s: %w", j.path, err)
	}
	j.m, j.faulted = m, 0 // a new map: its pages fault anew
	return nil
}

// prefault faults the map's pages in for writing ahead of the appends, up to at least end,
// journalPrefault at a time: one madvise(MADV_POPULATE_WRITE) for a megabyte of pages instead of a
// page fault on each page's first copy (a fault into a shared file map costs the sim about
// as much as the rest of a delivery's append). A kernel without it (before 5.14) says EINVAL
// and the copies fault as before.
func (j *journal) prefault(end int64) {
	from := max(j.faulted, j.size) &^ (pageSize - 1)
	to := min(max(end, from+journalPrefault), int64(len(j.m)))
	if err := populateWrite(j.m[from:to]); err != nil {
		j.noPrefault = true
		return
	}
	j.faulted = to
}

// readLineAt reads the line starting at off, without its newline.
func (j *journal) readLineAt(off int64) ([]byte, error) {
	var line []byte
	buf := make([]byte, 1024)
	for {
		n, err := j.f.ReadAt(buf, off)
		if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
			return append(line, buf[:i]...), nil
		}
		line = append(line, buf[:n]...)
		off += int64(n)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("sim: read %s at %d: %w", j.path, off, err)
		}
	}
}

// close unmaps the file and cuts it back to its records.
func (j *journal) close() error {
	var err error
	if j.m != nil {
		unmapFile(j.m)
		j.m = nil
		err = j.f.Truncate(j.size)
	}
	return errors.Join(err, j.f.Close())
}
