package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

const (
	segmentSuffix    = ".log"
	segmentNameWidth = 20
)

// segment is one file of the log; it holds the bytes of the virtual offsets
// [base, next segment's base), or [base, Log.End()) for the last one.
type segment struct {
	base int64
	file File
	fs   FS // what removes the file
}

func segmentName(base int64) string {
	return fmt.Sprintf("%0*d%s", segmentNameWidth, base, segmentSuffix)
}

// parseSegmentName accepts only what segmentName produces, so commit.log and
// stray files in the partition directory are never taken for segments.
func parseSegmentName(name string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || len(digits) != segmentNameWidth {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	base, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, false
	}
	return base, true
}

// listSegments returns the bases of the segment files in dir, ascending.
func listSegments(dir string) ([]int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var bases []int64
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if base, ok := parseSegmentName(e.Name()); ok {
			bases = append(bases, base)
		}
	}
	slices.Sort(bases)
	return bases, nil
}

func openSegment(fs FS, dir string, base int64, flag int) (*segment, error) {
	f, err := fs.OpenFile(filepath.Join(dir, segmentName(base)), os.O_RDWR|flag, 0o644)
	if err != nil {
		return nil, err
	}
	return &segment{base: base, file: f, fs: fs}, nil
}

func (s *segment) size() (int64, error) {
	fi, err := s.file.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// remove closes and deletes the segment's file.
func (s *segment) remove() error {
	name := s.file.Name()
	cerr := s.file.Close()
	if err := removeFile(s.fs, name); err != nil {
		return err
	}
	return cerr
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
