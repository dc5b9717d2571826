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
// Durability choice: every append is one write(2) made before the caller returns, and there is
// no fsync. A process that is killed (kill -9, panic, OOM) loses nothing, because its writes
// are already in the kernel's page cache; only a machine crash can lose the last records. That
// is the promise the sim needs (it stands for the outside world across gateway restarts), and
// an fsync per message would cost more than the rest of a send.
//
// A journal is not safe for concurrent appends; its owner serialises them under a mutex.
// Reads (readLineAt) may run concurrently with appends: they only touch bytes already written.
type journal struct {
	f    *os.File
	path string
	size int64 // offset of the next append
}

// openJournal opens or creates the journal at path. replay must be called before the first
// append.
func openJournal(path string) (*journal, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
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

// append writes b (one or more whole lines) with a single write(2) and returns the offset it
// starts at. On a failed or short write the file is cut back, so no partial line stays behind.
func (j *journal) append(b []byte) (int64, error) {
	off := j.size
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

func (j *journal) close() error { return j.f.Close() }
