package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// replayPlan is what a replay writes: per file, the writes recorded after
// the last record that cut or removed it, clipped to what a cut kept.
type replayPlan struct {
	writes map[string][]record
	order  []string // files in the order of their first writes (again after a cut), for a stable replay
}

func newReplayPlan() *replayPlan { return &replayPlan{writes: map[string][]record{}} }

// add takes the next record in the journal's order.
func (p *replayPlan) add(r record) {
	switch r.kind {
	case recWrite:
		if len(p.writes[r.path]) == 0 {
			p.order = append(p.order, r.path)
		}
		p.writes[r.path] = append(p.writes[r.path], r)
	case recTruncate:
		// The cut was synced with the file: what it kept of earlier writes
		// may still be only in the journal if the crash came before that
		// sync ended, so those writes stay, clipped.
		kept := p.writes[r.path][:0]
		for _, w := range p.writes[r.path] {
			if w.off >= r.off {
				continue
			}
			if end := w.off + int64(len(w.data)); end > r.off {
				w.data = w.data[:r.off-w.off]
			}
			kept = append(kept, w)
		}
		p.writes[r.path] = kept
	case recRemove:
		for path := range p.writes {
			if within(path, r.path) {
				delete(p.writes, path)
			}
		}
	}
}

// replay restores from the journal files seqs what their writes put in the
// partition files, where a crash lost it. A write whose bytes are in the
// file already is not written again: after a process crash the page cache
// has them all.
func (j *Journal) replay(seqs []uint64) (JournalReplay, error) {
	plan := newReplayPlan()
	rep, err := j.read(seqs, plan.add)
	if err != nil {
		return rep, err
	}
	done := make(map[string]bool, len(plan.order))
	for _, path := range plan.order {
		writes := plan.writes[path]
		if len(writes) == 0 || done[path] {
			continue
		}
		done[path] = true
		n, err := restore(filepath.Join(j.root, path), writes)
		if err != nil {
			return rep, fmt.Errorf("storage: journal replay into %s: %w", path, err)
		}
		if n > 0 {
			rep.Restored++
			rep.Bytes += n
		}
	}
	return rep, nil
}

// restore writes into the file at path each write whose bytes differ from
// the file's. It does not sync: the journal files stay until the next
// checkpoint, and cover what it wrote until then.
func restore(path string, writes []record) (int64, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return 0, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return 0, err
	}
	var written int64
	var have []byte
	for _, w := range writes {
		have = slices.Grow(have[:0], len(w.data))[:len(w.data)]
		n, err := f.ReadAt(have, w.off)
		if err != nil && !errors.Is(err, io.EOF) {
			f.Close()
			return written, err
		}
		if n == len(w.data) && bytes.Equal(have, w.data) {
			continue
		}
		if _, err := f.WriteAt(w.data, w.off); err != nil {
			f.Close()
			return written, err
		}
		written += int64(len(w.data))
	}
	return written, f.Close()
}

// JournalFloors reads the journal files under root and returns, for each
// file they recorded writes to and never cut or removed, all that a power
// loss may leave of it: the lowest offset they recorded, what the file held
// when the oldest journal file began; or, when the records leave a gap,
// the offset of the first record after the last gap. A gap is bytes
// written without records (a busy file's), and a record after them is
// noted only once an fsync of the file has made them, and all before
// them, durable. The fault suite uses it to take from a killed node's
// files what a power loss could.
func JournalFloors(root string) (map[string]int64, error) {
	j := &Journal{root: root, dir: filepath.Join(root, journalDir)}
	seqs, err := j.files()
	if err != nil {
		return nil, err
	}
	floors := map[string]int64{}
	ends := map[string]int64{} // where each file's last recorded write ended
	cut := map[string]bool{}
	var removed []string // directories and files removed: what is under them was cut
	under := func(path string) bool {
		for _, r := range removed {
			if within(path, r) {
				return true
			}
		}
		return false
	}
	_, err = j.read(seqs, func(r record) {
		path := filepath.Join(root, r.path)
		switch {
		case r.kind == recRemove:
			removed = append(removed, path)
		case r.kind == recTruncate:
			cut[path] = true
		case !cut[path]:
			// Partition files are append-only between cuts, so a file's
			// records climb: its floor is its first, or the first after a
			// gap. A channel's state file is written over from its start,
			// each record whole: its floor is 0.
			if end, seen := ends[path]; !seen || r.off > end {
				floors[path] = r.off
			}
			ends[path] = r.off + int64(len(r.data))
		}
	})
	if err != nil {
		return nil, err
	}
	for path := range floors {
		if cut[path] || under(path) {
			delete(floors, path)
		}
	}
	return floors, nil
}

// read hands each record of the journal files seqs to each, in order, up
// to each file's first torn or damaged record; records naming a path
// outside the data directory are skipped.
func (j *Journal) read(seqs []uint64, each func(record)) (JournalReplay, error) {
	var rep JournalReplay
	for _, seq := range seqs {
		b, err := os.ReadFile(filepath.Join(j.dir, journalName(seq)))
		if err != nil {
			return rep, err
		}
		recs, n := decodeJournal(b)
		rep.Files++
		rep.Records += int64(len(recs))
		rep.TornBytes += int64(len(b) - n)
		for _, r := range recs {
			if filepath.IsLocal(r.path) {
				each(r)
			}
		}
	}
	return rep, nil
}

// within reports whether path is dir or lies under it.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator))
}
