package persist

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrStorageUnavailable: the disk is full, or its free space is under the floor
// (BadgerOptions.MinFreeDisk). Nothing of the refused Commit was written; retry later (HTTP
// 503). Reads keep working.
var ErrStorageUnavailable = errors.New("storage unavailable")

// Free-space watching. Badger writes its write-ahead log (.mem) and value log (.vlog) through
// memory maps of files created at full size but sparse; writing into a hole when the file
// system has no block left raises SIGBUS, which no Go code can recover from. So the watcher
// (1) allocates those files' blocks ahead of Badger's writes (fallocate), so a write into
// them never needs a new block, and (2) refuses commits while free space is under
// the floor, which leaves room for Badger's own flushes and compactions.
const (
	diskCheckEvery = 200 * time.Millisecond
	// diskHysteresis is how far above the floor free space must come back before commits are
	// accepted again, so the state does not flap around the floor.
	diskHysteresis = 16 << 20
	// allocateLead is how far ahead of Badger's writes the mapped files are allocated: more
	// than Badger can write in one diskCheckEvery (80 MiB/s of commits).
	allocateLead = 16 << 20
)

// diskGuard watches the file system of one directory. low is read on every Commit (one atomic
// load); the rest is owned by the watcher goroutine, except cause (mu).
type diskGuard struct {
	dir   string
	floor uint64
	log   *slog.Logger
	// free reports the bytes available to us on dir's file system (statfs); tests replace it.
	free func(dir string) (uint64, error)
	// allocate gives a file real blocks up to lead bytes past its allocated part
	// (fallocate); tests replace it.
	allocate func(path string, lead int64) error

	low atomic.Bool

	mu    sync.Mutex
	cause string
}

func newDiskGuard(dir string, floor uint64, log *slog.Logger) *diskGuard {
	return &diskGuard{dir: dir, floor: floor, log: log, free: freeBytes, allocate: allocateFile}
}

// err is ErrStorageUnavailable with the cause while space is low, else nil.
func (g *diskGuard) err() error {
	if !g.low.Load() {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return fmt.Errorf("%w: %s", ErrStorageUnavailable, g.cause)
}

// setLow marks the storage unavailable (commits refused) with cause.
func (g *diskGuard) setLow(cause string) {
	g.mu.Lock()
	g.cause = cause
	g.mu.Unlock()
	if !g.low.Swap(true) {
		g.log.Warn("storage unavailable: refusing new writes until space returns", "dir", g.dir, "cause", cause)
	}
}

// check runs one round: allocate Badger's new mapped files, then compare free space with the
// floor. Called by the watcher, and once before Badger opens.
func (g *diskGuard) check() {
	g.allocateMapped()
	free, err := g.free(g.dir)
	if err != nil {
		// Unknown free space: keep the current state; allocation failures still count.
		return
	}
	switch {
	case free < g.floor:
		g.setLow(fmt.Sprintf("%s free on the data disk, under the floor of %s (--min-free-disk)", mib(free), mib(g.floor)))
	case g.low.Load() && free >= g.floor+min(diskHysteresis, g.floor/4+1):
		g.low.Store(false)
		g.log.Info("storage available again", "dir", g.dir, "free", mib(free))
	}
}

// beforeWrite checks free space right before a group is written (one statfs), so a disk
// filled by someone else between two watcher rounds is seen before Badger writes into it.
// nil guard (in-memory Badger): always nil.
func (g *diskGuard) beforeWrite() error {
	if g == nil {
		return nil
	}
	if free, err := g.free(g.dir); err == nil && free < g.floor {
		g.setLow(fmt.Sprintf("%s free on the data disk, under the floor of %s (--min-free-disk)", mib(free), mib(g.floor)))
	}
	return g.err()
}

// allocateMapped keeps allocateLead bytes of real blocks ahead of what Badger has written
// in each .mem and .vlog file. Those files are written sequentially from the start, so their
// allocated size tracks the write position; allocating them whole would cost up to twice the
// memtable and value-log sizes per file, on a value log that stays nearly empty.
func (g *diskGuard) allocateMapped() {
	entries, err := os.ReadDir(g.dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".mem") && !strings.HasSuffix(name, ".vlog") {
			continue
		}
		if err := g.allocate(filepath.Join(g.dir, name), allocateLead); err != nil && noSpace(err) {
			g.setLow(fmt.Sprintf("no space to allocate %s: %v", name, err))
		}
	}
}

// watch runs check every diskCheckEvery until stop closes.
func (g *diskGuard) watch(stop <-chan struct{}) {
	t := time.NewTicker(diskCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			g.check()
		}
	}
}

// noSpace says whether err is the file system's "no space left" (or quota) error.
func noSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
