package metrics

import (
	"hash/fnv"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/partitamq/partita/storage"
)

// rewalkEvery is how often a partition directory is walked again for
// partita_partition_disk_bytes; between walks its size follows its log.
const rewalkEvery = 2 * time.Minute

// diskUsage keeps each partition directory's size between scrapes.
// Walking every file of 10,000 partitions on every scrape cost a node
// half a second of CPU. Between walks a partition's size follows its log:
// what its committed end grew by (segments, length prefixes included) and
// 48 bytes a commit record. A directory is walked when first seen, when
// its log shrank (truncated on a rejoin), and again every rewalkEvery to
// catch what the log does not show (retention deleting segments, channel
// state); each directory's turn is offset by a hash of its path, so the
// walks spread over the scrapes rather than all falling on one.
type diskUsage struct {
	walk func(dir string) int64
	dirs map[string]*dirSize
}

type dirSize struct {
	end, records, bytes int64
	due                 time.Time // next walk
	seen                time.Time // last scrape that listed it
}

func newDiskUsage() *diskUsage {
	return &diskUsage{walk: dirBytes, dirs: map[string]*dirSize{}}
}

// bytes is dir's size now, given its partition's committed end and
// commit records; 0 for "" (an ephemeral partition).
func (u *diskUsage) bytes(dir string, end, records int64, now time.Time) int64 {
	if dir == "" {
		return 0
	}
	d := u.dirs[dir]
	switch {
	case d == nil:
		d = &dirSize{due: now.Add(offset(dir))}
		u.dirs[dir] = d
		d.bytes = u.walk(dir)
	case end < d.end || records < d.records || !now.Before(d.due):
		d.due = now.Add(rewalkEvery)
		d.bytes = u.walk(dir)
	default:
		d.bytes += end - d.end + (records-d.records)*storage.CommitRecordSize
	}
	d.end, d.records, d.seen = end, records, now
	return d.bytes
}

// offset spreads the first rewalk of each directory over rewalkEvery.
func offset(dir string) time.Duration {
	h := fnv.New64a()
	h.Write([]byte(dir))
	return time.Duration(h.Sum64() % uint64(rewalkEvery))
}

// forgetAfter is how long a directory no scrape listed is kept: a
// partition too busy to answer a scrape's stats in time is left out of
// that scrape, and forgetting it at once would walk it again at the next.
const forgetAfter = 2 * rewalkEvery

// forget drops the directories no scrape has listed for forgetAfter:
// partitions no longer hosted.
func (u *diskUsage) forget(now time.Time) {
	for dir, d := range u.dirs {
		if now.Sub(d.seen) >= forgetAfter {
			delete(u.dirs, dir)
		}
	}
}

// dirBytes sums the sizes of the files under dir.
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			n += info.Size()
		}
		return nil
	})
	return n
}
