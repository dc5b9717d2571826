package persist

import "github.com/dgraph-io/badger/v4"

// Badger's shape: the memtables, the levels and their tables, the value log. Every size follows
// from the memtable's, so that the free space Badger may need after commits stop (flushes and
// compactions, which write their files through memory maps, where a full disk is a fault and
// not an error) is known from the options alone: MinFreeDiskFor, the least --min-free-disk.

// DefaultMemTableSize is each memtable's size unless BadgerOptions says otherwise. Measured
// (bench/README.md, "Badger's options"): with messages' bodies in the value log, 32 MiB
// memtables cost the send path no more CPU than 64 MiB ones, and halve the floor.
const DefaultMemTableSize = 32 << 20

// shape is Badger's options that size the tree, for one memtable size.
type shape struct {
	memTable int64
	// memtables: the live one and those waiting for their flush; a write waits when all are
	// full.
	memtables int
	// l0Compact tables in level 0 start its compaction; at l0Stall, flushes (and then writes)
	// wait for it. Badger's defaults (5 and 15) let level 0 hold 15 memtables, which one
	// compaction then rewrites with the level below: what the floor must hold.
	l0Compact, l0Stall int
	// baseLevel is level 1's target size; baseTable every table's size below level 0 (the
	// same at every level: Badger's default doubles it per level, and a compaction rewrites
	// a table with the tables it overlaps in the next level).
	baseLevel, baseTable int64
	levelMultiplier      int
	// valueThreshold: a value this large or larger is written once to the value log, the tree
	// keeping a pointer to it. Messages' bodies (300-500 bytes) go there, every other record
	// (marks, outcomes, counters, index entries: under 128 bytes as written) stays in the
	// tree, so a body is never rewritten by a compaction. Measured with
	// BenchmarkOutboxWrites: 36 instead of 44 µs of CPU per message.
	valueThreshold int64
	vlogFile       int64 // value-log file size
	compactors     int
}

func shapeFor(memTable int64) shape {
	return shape{
		memTable: memTable, memtables: 4, l0Compact: 3, l0Stall: 5,
		baseLevel: memTable, baseTable: max(memTable/8, 256<<10), levelMultiplier: 10,
		valueThreshold: 128, vlogFile: 4 * memTable, compactors: 2,
	}
}

func (s shape) apply(o badger.Options) badger.Options {
	o = o.WithMemTableSize(s.memTable).WithNumMemtables(s.memtables).
		WithNumLevelZeroTables(s.l0Compact).WithNumLevelZeroTablesStall(s.l0Stall).
		WithBaseLevelSize(s.baseLevel).WithBaseTableSize(s.baseTable).WithLevelSizeMultiplier(s.levelMultiplier).
		WithValueThreshold(s.valueThreshold).WithValueLogFileSize(s.vlogFile).WithNumCompactors(s.compactors)
	o.TableSizeMultiplier = 1
	return o
}

// minFree is the free space Badger may still write into once commits are refused, which the
// floor must leave:
//
//   - every memtable flushed: memtables x memTable (a table is no larger than its memtable);
//   - one level-0 compaction: level 0 at its stall (l0Stall x memTable) rewritten with the
//     base level, which holds at most its target and the last level-0 compaction's output
//     (baseLevel + l0Stall x memTable); level-0 tables overlap one another, so only one such
//     compaction runs at a time;
//   - beside it, the other compactor's: one table and the tables it overlaps in the next
//     level, 2 x levelMultiplier + 2 with keys spread as the gateway's are (random message
//     ids under a few prefixes), each baseTable;
//   - the value log and write-ahead log files are allocated ahead by allocateLead.
//
// Value-log garbage collection, which rewrites live values, runs only while free space is
// above the floor by a value-log file (gcLoop). Nothing else writes.
func (s shape) minFree() int64 {
	flushes := int64(s.memtables) * s.memTable
	level0 := 2*int64(s.l0Stall)*s.memTable + s.baseLevel
	deeper := int64(2*s.levelMultiplier+3) * s.baseTable
	const mib = 1 << 20
	return (flushes + level0 + deeper + allocateLead + mib - 1) / mib * mib // whole MiB
}

// MinFreeDiskFor is the least free-space floor (BadgerOptions.MinFreeDisk, --min-free-disk)
// with memtables of memTable bytes (0: DefaultMemTableSize).
func MinFreeDiskFor(memTable int64) int64 {
	if memTable <= 0 {
		memTable = DefaultMemTableSize
	}
	return shapeFor(memTable).minFree()
}
